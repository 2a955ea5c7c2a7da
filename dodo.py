"""bastion's doit tasks: ``doit walk``, ``doit extract``, ``doit extract:<root>/<path>``.

Thin by design: the generators live in ``tasks/``.  Settings are doit variables, e.g.
``doit extract manifest=examples/manifest.yaml out=/tmp/out jobs=2 no_external=1``;
with none, the bundled ``examples/manifest.yaml`` is used.
"""

from doit import create_after, get_var

from tasks import pipeline
from tasks.config import RunConfig

CONFIG = RunConfig.from_vars(get_var)
DOIT_CONFIG = pipeline.doit_config(CONFIG)


def task_walk():
    """walk the manifest's roots into walk.jsonl"""
    return pipeline.walk_task(CONFIG)


@create_after(executed="walk")
def task_extract():
    """extract text from every walked file (one subtask per file)"""
    yield from pipeline.extract_tasks(CONFIG)


def task__extract_finish():
    """write extract.jsonl and extract.summary.json"""
    return pipeline.finish_task(CONFIG)
