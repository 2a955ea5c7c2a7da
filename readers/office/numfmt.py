"""Spreadsheet number formats (ECMA-376 §18.8.31, as Excel applies them): a number as shown.

:func:`compile_format` turns a format code into a :class:`NumberFormat` once per style; its
``render(value)`` gives the text a person reads in the cell:

* sections ``positive;negative;zero;text`` (a negative value shown by its own section loses
  its sign, as ``#,##0;(#,##0)`` shows ``(5)``); ``[Red]``-style colours and ``[>100]``
  conditions are ignored;
* literals kept: quoted text, ``\\x``, currency ``[$€-407]`` (the symbol), ``$ - + ( ) :`` and
  spaces; ``_x`` (a space the width of x) and ``*x`` (fill) are left out;
* digits: ``0`` (a digit or 0), ``#`` (a digit), ``?`` (a digit or a space), ``.`` decimals,
  ``,`` thousands between placeholders and a thousand divisor after the last, ``%`` ×100,
  ``E+00`` scientific, ``# ?/?`` and ``# ??/16`` fractions;
* rounding as Excel rounds: the double is first read with 15 significant digits, then
  rounded half away from zero (``0.025`` with ``0%`` shows ``3%``, ``1.005`` with ``0.00``
  ``1.01``);
* dates and times: :data:`NumberFormat.kind` is ``"date"``, ``"datetime"``, ``"time"`` or
  ``"elapsed"`` and :meth:`NumberFormat.render_time` renders the time tokens (``h:mm``,
  ``h:mm:ss AM/PM``, ``[h]:mm``, ``mm:ss.0``) and :meth:`NumberFormat.render_datetime` a
  date or date and time by all its tokens (``m/d/yyyy h:mm``, ``d-mmm-yy``, ``dddd``), as
  Excel shows them without a locale (English month and day names).

Everything is bounded by the format code, which the reader caps at :data:`MAX_CODE` chars.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from fractions import Fraction

MAX_CODE = 256  # longer format codes are not interpreted (the number shows as General)
MAX_DIGITS = 30  # placeholders counted per part at most

_TOKEN = re.compile(
    r'"(?P<q>[^"]*)"?'  # quoted literal
    r"|\\(?P<esc>.)"  # escaped character
    r"|\[\$(?P<cur>[^\]-]*)[^\]]*\]"  # currency / locale [$€-407]
    r"|\[(?P<br>[^\]]*)\]"  # colour, condition, [h] [mm] [ss]
    r"|_.|\*."  # padding and fill: nothing
    r"|(?P<gen>[Gg][Ee][Nn][Ee][Rr][Aa][Ll])"
    r"|(?P<ampm>AM/PM|am/pm|A/P|a/p)"
    r"|(?P<e>[Ee][+-])"
    r"|(?P<dt>[yY]+|[mM]+|[dD]+|[hH]+|[sS]+)"
    r"|(?P<ch>.)",
    re.DOTALL,
)
_DIGIT = frozenset("0#?")


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _month(month: int, n: int) -> str:
    """``m`` 9, ``mm`` 09, ``mmm`` Sep, ``mmmm`` September, ``mmmmm`` S."""
    if n <= 2:
        return str(month).zfill(n)
    name = _MONTHS[month - 1]
    return name[:3] if n == 3 else name[0] if n >= 5 else name


def _split_sections(code: str) -> list[str]:
    out: list[str] = []
    cur: list[str] = []
    quote, esc, br = False, False, False
    for ch in code:
        if esc:
            esc = False
        elif quote:
            quote = ch != '"'
        elif ch == '"':
            quote = True
        elif ch == "\\":
            esc = True
        elif ch == "[":
            br = True
        elif ch == "]":
            br = False
        elif ch == ";" and not br:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur))
    return out[:4]


# a single character's token kind (any other character is a literal)
_CHAR_KINDS = {"0": "digit", "#": "digit", "?": "digit", ".": "dot", ",": "comma", "%": "pct",
               "/": "slash", "@": "at"}


def _tokens(section: str) -> list[tuple[str, str]]:
    """A section's tokens, ``(kind, text)``: ``lit`` (quoted, escaped, a currency symbol,
    ``General``, any other character), ``elapsed`` (``[h]``), ``ampm``, ``exp`` (its sign),
    ``dt`` (``yyyy``, ``mm`` …, lower case), ``digit``, ``dot``, ``comma``, ``pct``,
    ``slash``, ``at``; colours, conditions, padding and fill give none."""
    toks: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(section):
        g = m.lastgroup
        if g in ("q", "esc", "cur"):
            toks.append(("lit", m.group(g)))
        elif g == "br":
            inner = m.group("br").lower()
            if inner and set(inner) <= set("hms"):
                toks.append(("elapsed", inner))
        elif g == "gen":
            toks.append(("lit", "General"))
        elif g == "ampm":
            toks.append(("ampm", m.group("ampm")))
        elif g == "e":
            toks.append(("exp", m.group("e")[1]))
        elif g == "dt":
            toks.append(("dt", m.group("dt").lower()))
        elif g == "ch":
            ch = m.group("ch")
            toks.append((_CHAR_KINDS.get(ch, "lit"), ch))
    return toks


def round_half_up(value: float, places: int) -> Decimal:
    """``value`` read with 15 significant digits, rounded half away from zero."""
    d = Decimal(format(value, ".15g"))
    return d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def _general(value: float) -> str:
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    text = format(value, ".15g")
    if "e" in text:
        mant, exp = text.split("e")
        return f"{mant.upper()}E{exp[0]}{exp[1:].lstrip('0').zfill(2)}"
    return text


# The grammar a section is read by: tokens (:func:`_tokens`) make a section of one kind
# (:func:`_section_kind`); a number section is literals around the number's placeholders
# (:class:`_Layout`: fixed, scientific or a fraction), a time or date section a run of date
# and time tokens and literals (:meth:`_Section.time`).

def _section_kind(toks: list[tuple[str, str]]) -> str:
    """What a section shows: ``elapsed``, ``datetime``, ``date``, ``time``, ``number``,
    ``text`` (``@``), ``general`` or ``literal`` (text alone)."""
    kinds = {k for k, _ in toks}
    dt = [v for k, v in toks if k == "dt"]
    timey = any(v[0] in "hs" for v in dt)
    if "elapsed" in kinds:
        return "elapsed"
    if _is_date(dt, kinds):
        return "datetime" if timey else "date"
    if timey:
        return "time"
    if _is_number(toks, kinds):
        return "number"
    if "at" in kinds:
        return "text"
    if any(k == "lit" and v.lower() == "general" for k, v in toks) or not toks:
        return "general"
    return "literal"


def _is_date(dt: list[str], kinds: set[str]) -> bool:
    """Date tokens: a year or a day, or months alone in a section without digits."""
    return bool(dt) and (any(v[0] in "yd" for v in dt)
                         or ("digit" not in kinds and all(v[0] == "m" for v in dt)))


def _is_number(toks: list[tuple[str, str]], kinds: set[str]) -> bool:
    """Digit placeholders, or ``General`` with a literal beside it (``"Total: "General``)."""
    return "digit" in kinds or ("lit", "General") in toks and any(
        k == "lit" and v.strip() and v != "General" for k, v in toks)


def _general_at(toks: list[tuple[str, str]]) -> int | None:
    return next((i for i, (k, v) in enumerate(toks) if k == "lit" and v.lower() == "general"),
                None)


class _Layout:
    """A number section's parts: the literals before the number and after it, the number's
    placeholders (``mid``) and how they show it (``form``: :func:`_fixed`,
    :func:`_scientific` or :func:`_fraction`), the thousands it divides by (commas right
    after the number) and the percent signs it multiplies by."""

    __slots__ = ("pre", "mid", "post", "scale", "pct", "form")

    def __init__(self, toks: list[tuple[str, str]]) -> None:
        idx = [i for i, (k, _) in enumerate(toks) if k in ("digit", "dot", "exp", "slash")]
        first, last = idx[0], idx[-1]
        if toks[last][0] == "slash":  # a fixed denominator: '# ??/16'
            while last + 1 < len(toks) and toks[last + 1][1].isdigit():
                last += 1
        self.pre = "".join(v for k, v in toks[:first] if k in ("lit", "pct"))
        self.post = "".join(v for k, v in toks[last + 1:] if k in ("lit", "pct"))
        self.mid = toks[first:last + 1]
        self.scale = 0
        for k, _ in toks[last + 1:]:
            if k != "comma":
                break
            self.scale += 1
        self.pct = sum(1 for k, _ in toks if k == "pct")
        self.form = (_fraction if any(k == "slash" for k, _ in self.mid)
                     else _scientific if any(k == "exp" for k, _ in self.mid) else _fixed)

    def render(self, value: float) -> str:
        v = abs(value) * (100 ** self.pct) / (1000 ** self.scale)
        return self.pre + self.form(self.mid, v) + self.post


def _at_dot(part: list[tuple[str, str]]) -> tuple[int | None, list[tuple[str, str]],
                                                    list[tuple[str, str]]]:
    """Placeholders split at their decimal point: (its index or None, before, after)."""
    dot = next((i for i, (k, _) in enumerate(part) if k == "dot"), None)
    return dot, (part if dot is None else part[:dot]), ([] if dot is None else part[dot + 1:])


def _fixed(mid: list[tuple[str, str]], v: float) -> str:
    """A number in fixed notation: ``#,##0.00``, ``0.0#``, ``(000) 000-0000``."""
    dot, ipart, fpart = _at_dot(mid)
    iph = [c for k, c in ipart if k == "digit"][:MAX_DIGITS]
    fph = [c for k, c in fpart if k == "digit"][:MAX_DIGITS]
    istr, _, fstr = format(round_half_up(v, len(fph)), "f").partition(".")
    if istr == "0" and "0" not in iph:
        istr = ""
    if any(k == "comma" for k, _ in ipart):
        itext = _grouped(istr, iph, ipart)
    else:
        itext = _placed(istr, ipart)
    if dot is None:
        return itext
    return itext + "." + _decimals(fstr, fph)


def _grouped(istr: str, iph: list[str], ipart: list[tuple[str, str]]) -> str:
    """The integer digits grouped by thousands, keeping the leading zeros the placeholders
    ask for, the part's literals after them."""
    zeros = sum(1 for c in iph if c == "0")
    digits = istr.zfill(zeros) if zeros else istr
    groups: list[str] = []
    while len(digits) > 3:
        groups.insert(0, digits[-3:])
        digits = digits[:-3]
    if digits:
        groups.insert(0, digits)
    return ",".join(groups) + "".join(c for k, c in ipart if k == "lit")


def _placed(istr: str, ipart: list[tuple[str, str]]) -> str:
    """The integer digits filled from the right into the placeholders, literals in between;
    the leftmost placeholder takes every digit left."""
    places = list(istr)
    out: list[str] = []
    slots = [(k, c) for k, c in ipart if k in ("digit", "lit")]
    n_ph = sum(1 for k, _ in slots if k == "digit")
    seen = 0
    for k, c in reversed(slots):
        if k == "lit":
            out.append(c)
            continue
        seen += 1
        if seen == n_ph and len(places) > 1:
            out.append("".join(places))
            places = []
        elif places:
            out.append(places.pop())
        else:
            out.append("0" if c == "0" else " " if c == "?" else "")
    if places:
        out.append("".join(places))
    return "".join(reversed(out))


def _decimals(fstr: str, fph: list[str]) -> str:
    """The decimals: trailing zeros under ``#`` shown as nothing, under ``?`` as a space."""
    f = list(fstr)
    for i in range(len(fph) - 1, -1, -1):
        if f[i] != "0" or fph[i] == "0":
            break
        f[i] = "" if fph[i] == "#" else " "
    return "".join(f)


def _scientific(mid: list[tuple[str, str]], v: float) -> str:
    """A number in scientific notation: ``0.00E+00``, ``##0.0E+0`` (engineering: the
    exponent a multiple of the integer placeholders)."""
    e_at = next(i for i, (k, _) in enumerate(mid) if k == "exp")
    sign = mid[e_at][1]
    eph = [c for k, c in mid[e_at + 1:] if k == "digit"][:MAX_DIGITS]
    dot, ipart, fpart = _at_dot(mid[:e_at])
    iph = [c for k, c in ipart if k == "digit"]
    fph = [c for k, c in fpart if k == "digit"][:MAX_DIGITS]
    step = len(iph) if len(iph) > 1 and "#" in iph else 1
    m, exp = _mantissa(v, step, len(fph))
    mtext = format(m, "f")
    if dot is None:
        mtext = mtext.partition(".")[0]
    esign = "-" if exp < 0 else ("+" if sign == "+" else "")
    return f"{mtext}E{esign}{str(abs(exp)).zfill(len(eph) or 1)}"


def _mantissa(v: float, step: int, places: int) -> tuple[Decimal, int]:
    """The mantissa (rounded to ``places``) and the exponent, a multiple of ``step``."""
    if v == 0:
        exp = 0
    else:
        exp = math.floor(math.log10(v))
        exp -= exp % step
    m = round_half_up(v / (10 ** exp), places) if v else Decimal(0)
    if m >= 10 ** step:
        exp += step
        m = round_half_up(v / (10 ** exp), places)
    return m, exp


def _fraction(mid: list[tuple[str, str]], v: float) -> str:
    """A number as a fraction: ``# ?/?``, ``# ??/16``, ``?/?``."""
    s_at = next(i for i, (k, _) in enumerate(mid) if k == "slash")
    left, right = mid[:s_at], mid[s_at + 1:]
    den_text = "".join(c for k, c in right if k in ("digit", "lit")).strip()
    # numerator: the digit placeholders just before '/'; an integer part before a space
    j = len(left)
    while j and left[j - 1][0] == "digit":
        j -= 1
    has_int = any(k == "digit" for k, _ in left[:j])
    whole = int(v) if has_int else 0
    rest = v - whole
    if den_text.isdigit():
        den = max(int(den_text), 1)
        num = int(round_half_up(rest * den, 0))
    else:
        places = min(max(sum(1 for k, _ in right if k == "digit"), 1), 6)
        fr = Fraction(rest).limit_denominator(10 ** places - 1)
        num, den = fr.numerator, fr.denominator
    if num == den and has_int:
        whole, num = whole + 1, 0
    if num == 0:
        return str(whole) if has_int else "0"
    frac = f"{num}/{den}"
    return f"{whole} {frac}" if has_int and whole else frac


def _second_decimals(toks: list[tuple[str, str]]) -> int:
    """The decimals shown after the seconds (``ss.00``: 2, at most 3)."""
    frac_digits = 0
    for i, (k, v) in enumerate(toks):
        if k == "dot" and i and toks[i - 1][0] == "dt" and toks[i - 1][1][0] == "s":
            frac_digits = min(sum(1 for k2, _ in toks[i + 1:i + 4] if k2 == "digit"), 3)
    return frac_digits


class _Clock:
    """A serial day count as the time tokens show it: the seconds in all (``total``: what
    elapsed time counts) and their fraction, the time of day, and the day (``when``: None
    when no date is shown)."""

    __slots__ = ("total", "frac", "h", "mi", "s", "when")

    def __init__(self, serial: float, base: datetime | None, frac_digits: int) -> None:
        total = round_half_up(serial * 86400, frac_digits)
        self.total = int(total)
        self.frac = total - self.total
        self.when = base + timedelta(days=self.total // 86400) if base is not None else None
        self.h, rem = divmod(self.total % 86400, 3600)
        self.mi, self.s = divmod(rem, 60)

    def elapsed(self, v: str) -> str:
        """``[h]``, ``[mm]``, ``[ss]``: the hours, minutes or seconds in all."""
        unit = v[0]
        n = self.total // 3600 if unit == "h" else self.total // 60 if unit == "m" else self.total
        return str(n).zfill(len(v))

    def am_pm(self, v: str) -> str:
        pm = self.h >= 12
        return ("PM" if pm else "AM") if v.lower() == "am/pm" else ("P" if pm else "A")

    def decimals(self, digits: int) -> str:
        """The seconds' decimals, after their point."""
        return "." + format(self.frac, "f")[2:2 + digits].ljust(digits, "0")

    def date(self, c: str, n: int) -> str | None:
        """A date token (``y``, ``m`` as a month, ``d``), None when no date is shown."""
        when = self.when
        if when is None:
            return None
        if c == "m":
            return _month(when.month, n)
        if c == "y":
            return f"{when.year % 100:02d}" if n <= 2 else f"{when.year:04d}"
        return str(when.day).zfill(n) if n <= 2 else _WEEKDAYS[when.weekday()][:3 if n == 3 else None]


# tokens a time or date section shows as they are written
_AS_WRITTEN = frozenset(("lit", "pct", "comma", "dot", "slash", "digit"))


class _Section:
    """One section of a format code: its tokens and what they show (:func:`_section_kind`);
    a number section's layout, or where its ``General`` stands."""

    __slots__ = ("toks", "kind", "has_sign", "general", "layout")

    def __init__(self, toks: list[tuple[str, str]]) -> None:
        self.toks = toks
        self.kind = _section_kind(toks)
        self.has_sign = any(k == "lit" and "-" in v for k, v in toks)
        self.general = _general_at(toks) if self.kind == "number" else None
        self.layout = (_Layout(toks) if self.kind == "number" and self.general is None
                       else None)

    def number(self, value: float) -> str:
        if self.general is not None:  # General with literals around it
            toks, gen = self.toks, self.general
            pre = "".join(v for k, v in toks[:gen] if k == "lit")
            return pre + _general(abs(value)) + "".join(v for k, v in toks[gen + 1:] if k == "lit")
        assert self.layout is not None
        return self.layout.render(value)

    def time(self, serial: float, base: datetime | None = None) -> str:
        """The time tokens of this section for a serial day count; the date tokens too when
        ``base`` (the workbook's day 0) is given, else they are left out."""
        toks = self.toks
        ampm = any(k == "ampm" for k, _ in toks)
        frac_digits = _second_decimals(toks)
        clock = _Clock(serial, base, frac_digits)
        out: list[str] = []
        prev_h = False  # the last time token was an hour: an ``m`` after it is minutes
        skip_digits = 0
        for i, (k, v) in enumerate(toks):
            if skip_digits and k == "digit":
                skip_digits -= 1
                continue
            if k == "dt":
                text, prev_h = self._date_time(i, v, clock, ampm, prev_h)
                if text is not None:
                    out.append(text)
            elif k == "elapsed":
                out.append(clock.elapsed(v))
                prev_h = v[0] == "h"
            elif k == "ampm":
                out.append(clock.am_pm(v))
            elif k == "dot" and frac_digits and i and toks[i - 1][0] == "dt":
                out.append(clock.decimals(frac_digits))
                skip_digits = frac_digits
            elif k in _AS_WRITTEN:
                out.append(v)
        return "".join(out).strip()

    def _date_time(self, i: int, v: str, clock: _Clock, ampm: bool,
                   prev_h: bool) -> tuple[str | None, bool]:
        """Token ``i`` (``v``: ``h``, ``mm``, ``yyyy`` …) as shown, None when it shows a date
        and none is; and whether it was an hour."""
        c, n = v[0], len(v)
        if c == "h":
            return str((clock.h % 12 or 12) if ampm else clock.h).zfill(min(n, 2)), True
        if c == "s":
            return str(clock.s).zfill(min(n, 2)), False
        if c == "m":
            if prev_h or self._seconds_next(i):  # minutes, not a month
                return str(clock.mi).zfill(min(n, 2)), False
            return clock.date(c, n), False
        text = clock.date(c, n)
        return text, prev_h if text is None else False

    def _seconds_next(self, i: int) -> bool:
        """The next time token after token ``i`` is seconds (``mm:ss``)."""
        nxt = next((t for t in self.toks[i + 1:] if t[0] in ("dt", "elapsed")), None)
        return bool(nxt and nxt[1][0] == "s")


class NumberFormat:
    """A compiled format code; see the module docstring."""

    __slots__ = ("sections", "kind")

    def __init__(self, sections: list[_Section]) -> None:
        self.sections = sections
        self.kind = sections[0].kind

    def _section(self, value: float) -> tuple[_Section, bool]:
        s = self.sections
        if value < 0 and len(s) >= 2 and s[1].kind in ("number", "literal"):
            return s[1], False
        if value == 0 and len(s) >= 3 and s[2].kind in ("number", "literal"):
            return s[2], False
        return s[0], value < 0

    def render(self, value: float) -> str | None:
        """The number as shown, or None when this format does not apply (text, dates)."""
        if not math.isfinite(value):
            return None
        sec, minus = self._section(value)
        if sec.kind == "literal":
            return "".join(v for k, v in sec.toks if k == "lit").strip()
        if sec.kind != "number":
            return None
        try:
            text = sec.number(value).strip()
        except (InvalidOperation, ValueError, OverflowError, ZeroDivisionError):
            return None
        if minus and any(ch in "123456789" for ch in text):
            text = "-" + text
        return text

    def render_time(self, serial: float) -> str:
        return self.sections[0].time(serial)

    def render_datetime(self, serial: float, base: datetime) -> str:
        """A date, or a date and time, as this format shows it (``9/15/2011 15:22``,
        ``15-Sep-11``, ``Thursday, September 15, 2011``); ``base`` is the workbook's day 0
        (1899-12-30, or 1904-01-01 for the 1904 date system).  Month and day names are
        English, as Excel shows them without a locale."""
        return self.sections[0].time(serial, base)


@lru_cache(maxsize=512)  # a chart or workbook repeats a few codes; compiled formats never change
def compile_format(code: str) -> NumberFormat | None:
    """The compiled format, or None for General, text-only or an over-long code."""
    if not code or len(code) > MAX_CODE:
        return None
    sections = [_Section(_tokens(s)) for s in _split_sections(code)]
    if sections[0].kind in ("general", "text"):
        return None
    return NumberFormat(sections)
