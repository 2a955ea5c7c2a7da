"""bastion's doit tasks: ``doit walk``, ``doit extract``, ``doit extract:<root>/<path>``,
``doit index``.

Thin by design: the generators live in ``tasks/``, and close over one explicit run.  Settings
are doit variables, e.g. ``doit extract manifest=examples/manifest.yaml out=/tmp/out jobs=2
no_external=1``; with none, the bundled ``examples/manifest.yaml`` is used.
"""

import sys

from doit import get_var

from bastion.tasks import pipeline
from bastion.tasks.config import RunConfig
from bastion.tasks.extract.run import Run

RUN = Run(RunConfig.from_vars(get_var, argv=sys.argv[1:]))
DOIT_CONFIG = pipeline.doit_config(RUN.cfg, run=RUN)


def task_walk():
    """walk the manifest's roots into walk.jsonl"""
    return pipeline.walk_task(RUN)


def task_extract():
    """extract text from every walked file (one subtask per file)"""
    yield from pipeline.extract_tasks(RUN)


task_extract = pipeline.after_walk(RUN, task_extract)


def task__extract_finish():
    """write extract.jsonl and extract.summary.json"""
    return pipeline.finish_task(RUN)


def task_index():
    """index the stored texts for bastion search (the manifest's stages: walk, extract, index)"""
    return pipeline.index_task(RUN)
