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


def _tokens(section: str) -> list[tuple[str, str]]:
    toks: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(section):
        g = m.lastgroup
        if g == "q":
            toks.append(("lit", m.group("q")))
        elif g == "esc":
            toks.append(("lit", m.group("esc")))
        elif g == "cur":
            toks.append(("lit", m.group("cur")))
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
            kind = ("digit" if ch in _DIGIT else "dot" if ch == "." else "comma" if ch == ","
                    else "pct" if ch == "%" else "slash" if ch == "/" else "at" if ch == "@"
                    else "lit")
            toks.append((kind, ch))
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


class _Section:
    __slots__ = ("toks", "kind", "has_sign")

    def __init__(self, toks: list[tuple[str, str]]) -> None:
        self.toks = toks
        kinds = {k for k, _ in toks}
        dt = [v for k, v in toks if k == "dt"]
        if "elapsed" in kinds:
            self.kind = "elapsed"
        elif dt and any(v[0] in "yd" for v in dt) or (dt and "digit" not in kinds
                                                      and all(v[0] == "m" for v in dt)):
            timey = any(v[0] in "hs" for v in dt)
            self.kind = "datetime" if timey else "date"
        elif dt and any(v[0] in "hs" for v in dt):
            self.kind = "time"
        elif "digit" in kinds or ("lit", "General") in toks and any(
                k == "lit" and v.strip() and v != "General" for k, v in toks):
            self.kind = "number"
        elif "at" in kinds:
            self.kind = "text"
        elif any(k == "lit" and v.lower() == "general" for k, v in toks) or not toks:
            self.kind = "general"
        else:
            self.kind = "literal"
        self.has_sign = any(k == "lit" and "-" in v for k, v in toks)

    # -- numbers ---------------------------------------------------------------------------

    def number(self, value: float) -> str:
        toks = self.toks
        gen = next((i for i, (k, v) in enumerate(toks) if k == "lit" and v.lower() == "general"),
                   None)
        if gen is not None:
            pre = "".join(v for k, v in toks[:gen] if k == "lit")
            return pre + _general(abs(value)) + "".join(v for k, v in toks[gen + 1:] if k == "lit")
        idx = [i for i, (k, _) in enumerate(toks) if k in ("digit", "dot", "exp", "slash")]
        first, last = idx[0], idx[-1]
        if toks[last][0] == "slash":  # a fixed denominator: '# ??/16'
            while last + 1 < len(toks) and toks[last + 1][1].isdigit():
                last += 1
        pre = "".join(v for k, v in toks[:first] if k in ("lit", "pct"))
        post = "".join(v for k, v in toks[last + 1:] if k in ("lit", "pct"))
        mid = toks[first:last + 1]
        # trailing commas right after the number divide by 1000 each
        scale = 0
        for k, _ in toks[last + 1:]:
            if k != "comma":
                break
            scale += 1
        pct = sum(1 for k, _ in toks if k == "pct")
        v = abs(value) * (100 ** pct) / (1000 ** scale)
        if any(k == "slash" for k, _ in mid):
            body = self._fraction(mid, v)
        elif any(k == "exp" for k, _ in mid):
            body = self._scientific(mid, v)
        else:
            body = self._fixed(mid, v)
        return pre + body + post

    @staticmethod
    def _fixed(mid: list[tuple[str, str]], v: float) -> str:
        dot = next((i for i, (k, _) in enumerate(mid) if k == "dot"), None)
        ipart = mid if dot is None else mid[:dot]
        fpart = [] if dot is None else mid[dot + 1:]
        iph = [c for k, c in ipart if k == "digit"][:MAX_DIGITS]
        fph = [c for k, c in fpart if k == "digit"][:MAX_DIGITS]
        thousands = any(k == "comma" for k, _ in ipart)
        d = round_half_up(v, len(fph))
        text = format(d, "f")
        istr, _, fstr = text.partition(".")
        if istr == "0" and "0" not in iph:
            istr = ""
        if thousands:
            zeros = sum(1 for c in iph if c == "0")
            digits = istr.zfill(zeros) if zeros else istr
            # group by thousands, keeping the leading zeros the placeholders ask for
            groups: list[str] = []
            while len(digits) > 3:
                groups.insert(0, digits[-3:])
                digits = digits[:-3]
            if digits:
                groups.insert(0, digits)
            istr = ",".join(groups)
            ilits = "".join(c for k, c in ipart if k == "lit")
            itext = istr + ilits
        else:
            # fill digits from the right into the placeholders, literals in between
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
                if seen == n_ph and len(places) > 1:  # the leftmost takes every digit left
                    out.append("".join(places))
                    places = []
                elif places:
                    out.append(places.pop())
                else:
                    out.append("0" if c == "0" else " " if c == "?" else "")
            if places:
                out.append("".join(places))
            itext = "".join(reversed(out))
        if dot is None:
            return itext
        f = list(fstr)
        # trailing '#' show no trailing zeros, '?' a space
        for i in range(len(fph) - 1, -1, -1):
            if f[i] != "0" or fph[i] == "0":
                break
            f[i] = "" if fph[i] == "#" else " "
        return itext + "." + "".join(f)

    @staticmethod
    def _scientific(mid: list[tuple[str, str]], v: float) -> str:
        e_at = next(i for i, (k, _) in enumerate(mid) if k == "exp")
        sign = mid[e_at][1]
        mant = mid[:e_at]
        eph = [c for k, c in mid[e_at + 1:] if k == "digit"][:MAX_DIGITS]
        dot = next((i for i, (k, _) in enumerate(mant) if k == "dot"), None)
        iph = [c for k, c in (mant if dot is None else mant[:dot]) if k == "digit"]
        fph = [] if dot is None else [c for k, c in mant[dot + 1:] if k == "digit"]
        fph = fph[:MAX_DIGITS]
        step = len(iph) if len(iph) > 1 and "#" in iph else 1
        if v == 0:
            exp = 0
        else:
            exp = math.floor(math.log10(v))
            exp -= exp % step
        m = round_half_up(v / (10 ** exp), len(fph)) if v else Decimal(0)
        if m >= 10 ** step:
            exp += step
            m = round_half_up(v / (10 ** exp), len(fph))
        mtext = format(m, "f")
        if dot is None:
            mtext = mtext.partition(".")[0]
        esign = "-" if exp < 0 else ("+" if sign == "+" else "")
        return f"{mtext}E{esign}{str(abs(exp)).zfill(len(eph) or 1)}"

    @staticmethod
    def _fraction(mid: list[tuple[str, str]], v: float) -> str:
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

    # -- times -----------------------------------------------------------------------------

    def time(self, serial: float, base: datetime | None = None) -> str:
        """The time tokens of this section for a serial day count; the date tokens too when
        ``base`` (the workbook's day 0) is given, else they are left out."""
        toks = self.toks
        ampm = any(k == "ampm" for k, _ in toks)
        frac_digits = 0
        for i, (k, v) in enumerate(toks):
            if k == "dot" and i and toks[i - 1][0] == "dt" and toks[i - 1][1][0] == "s":
                frac_digits = min(sum(1 for k2, _ in toks[i + 1:i + 4] if k2 == "digit"), 3)
        total = round_half_up(serial * 86400, frac_digits)
        secs_total = int(total)
        frac = total - secs_total
        day_secs = secs_total % 86400
        when = base + timedelta(days=secs_total // 86400) if base is not None else None
        h, rem = divmod(day_secs, 3600)
        mi, s = divmod(rem, 60)
        out: list[str] = []
        prev_h = False
        skip_digits = 0
        for i, (k, v) in enumerate(toks):
            if skip_digits and k == "digit":
                skip_digits -= 1
                continue
            if k == "elapsed":
                unit = v[0]
                n = (secs_total // 3600 if unit == "h" else secs_total // 60 if unit == "m"
                     else secs_total)
                out.append(str(n).zfill(len(v)))
                prev_h = unit == "h"
            elif k == "dt":
                c = v[0]
                if c == "h":
                    hh = (h % 12 or 12) if ampm else h
                    out.append(str(hh).zfill(min(len(v), 2)))
                    prev_h = True
                elif c == "m":
                    nxt = next((t for t in toks[i + 1:] if t[0] in ("dt", "elapsed")), None)
                    if prev_h or (nxt and nxt[1][0] == "s"):
                        out.append(str(mi).zfill(min(len(v), 2)))
                    elif when is not None:
                        out.append(_month(when.month, len(v)))
                    prev_h = False
                elif c == "y" and when is not None:
                    out.append(f"{when.year % 100:02d}" if len(v) <= 2 else f"{when.year:04d}")
                    prev_h = False
                elif c == "d" and when is not None:
                    n = len(v)
                    out.append(str(when.day).zfill(n) if n <= 2 else
                               _WEEKDAYS[when.weekday()][:3 if n == 3 else None])
                    prev_h = False
                elif c == "s":
                    out.append(str(s).zfill(min(len(v), 2)))
                    prev_h = False
            elif k == "ampm":
                pm = h >= 12
                out.append(("PM" if pm else "AM") if v.lower() == "am/pm" else
                           ("P" if pm else "A"))
            elif k == "dot" and frac_digits and i and toks[i - 1][0] == "dt":
                out.append("." + format(frac, "f")[2:2 + frac_digits].ljust(frac_digits, "0"))
                skip_digits = frac_digits
            elif k in ("lit", "pct", "comma", "dot", "slash", "digit"):
                out.append(v)
        return "".join(out).strip()


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
