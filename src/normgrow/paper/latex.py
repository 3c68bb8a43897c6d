"""Text and numbers as pdflatex reads them: the `.tex` tables (normgrow.paper.tables) are compiled
by pdflatex with booktabs, which stops at any character outside ASCII that LaTeX has no definition
for ("Unicode character ... not set up for use with LaTeX").

Every non-ASCII character is mapped to LaTeX here (symbols in math mode: `$\\Sigma$`, `$\\approx$`),
accented Latin letters to their accent commands (`é` → `\\'{e}`), and any other one is refused by
name (`UnmappedCharacter`) rather than written. LaTeX's special characters (`_ % & # $ { } ~ ^ \\`)
are escaped. Signed numbers are typeset as numbers, in math mode with a math minus (`-0.0123` →
`$-0.0123$`; a text hyphen would print as a hyphen), and scientific notation as a power of ten
(`1e-08` → `$10^{-8}$`, `$2.5\\times10^{-4}$`). A subscript written with an underscore after a lone
letter is typeset as one (`Δ_grow` → `$\\Delta_{\\mathrm{grow}}$`, `q_teacher`); an underscore inside a
name (`padding_free`) stays an underscore. A tilde prints as `$\\sim$` (`~19k`), not a raised accent.

A table fits the text width of a one-column article (normgrow.paper.tables): a column name and a
long text wrap onto lines (`header_lines`, `value_lines`), a value's spread goes under it in a smaller
size, the columns are set in groups whose estimated width fits the line (`column_groups`), and
`fit_to_width` shrinks a tabular that is still wider (graphicx's `\\resizebox`).
"""

from __future__ import annotations

import re
import textwrap
import unicodedata

# ASCII characters that LaTeX reads as commands, or prints as another glyph in its default (OT1) font
ASCII = {"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "_": "\\_", "#": "\\#", "$": "\\$", "{": "\\{",
         "}": "\\}", "~": "$\\sim$", "^": "\\textasciicircum{}", "<": "$<$", ">": "$>$", "|": "$|$"}

# non-ASCII characters in math mode, by their LaTeX math command
MATH = {
    # Greek (ε and φ in the shapes the Unicode letters have)
    "α": "\\alpha", "β": "\\beta", "γ": "\\gamma", "δ": "\\delta", "ε": "\\varepsilon", "ϵ": "\\epsilon",
    "ζ": "\\zeta", "η": "\\eta", "θ": "\\theta", "ι": "\\iota", "κ": "\\kappa", "λ": "\\lambda", "μ": "\\mu",
    "µ": "\\mu", "ν": "\\nu", "ξ": "\\xi", "π": "\\pi", "ρ": "\\rho", "σ": "\\sigma", "τ": "\\tau",
    "υ": "\\upsilon", "φ": "\\varphi", "ϕ": "\\phi", "χ": "\\chi", "ψ": "\\psi", "ω": "\\omega",
    "Γ": "\\Gamma", "Δ": "\\Delta", "Θ": "\\Theta", "Λ": "\\Lambda", "Ξ": "\\Xi", "Π": "\\Pi", "Σ": "\\Sigma",
    "Υ": "\\Upsilon", "Φ": "\\Phi", "Ψ": "\\Psi", "Ω": "\\Omega",
    # arrows
    "→": "\\rightarrow", "←": "\\leftarrow", "↑": "\\uparrow", "↓": "\\downarrow", "↔": "\\leftrightarrow",
    "⇒": "\\Rightarrow", "⇐": "\\Leftarrow", "⇔": "\\Leftrightarrow", "↦": "\\mapsto",
    # relations and operators
    "≈": "\\approx", "≤": "\\le", "≥": "\\ge", "≠": "\\neq", "≪": "\\ll", "≫": "\\gg", "∼": "\\sim",
    "≃": "\\simeq", "≡": "\\equiv", "∝": "\\propto", "∈": "\\in", "×": "\\times", "·": "\\cdot", "⋅": "\\cdot",
    "∘": "\\circ", "±": "\\pm", "∓": "\\mp", "÷": "\\div", "−": "-", "∞": "\\infty", "∑": "\\sum",
    "∏": "\\prod", "∂": "\\partial", "∇": "\\nabla", "√": "\\surd", "‖": "\\|", "′": "\\prime",
    "°": "^\\circ", "¹": "^1", "²": "^2", "³": "^3", "½": "\\frac{1}{2}", "¼": "\\frac{1}{4}",
    "¾": "\\frac{3}{4}",
}

# non-ASCII characters in text mode
TEXT = {
    "–": "--", "—": "---", "…": "\\ldots{}", "‘": "`", "’": "'", "“": "``", "”": "''", "§": "\\S{}",
    "¶": "\\P{}", "•": "\\textbullet{}", "†": "\\dag{}", "‡": "\\ddag{}", "©": "\\copyright{}",
    "\u00a0": "~", "\u2009": "\\,", "\u202f": "\\,", "ß": "\\ss{}", "ø": "\\o{}", "Ø": "\\O{}", "æ": "\\ae{}",
    "Æ": "\\AE{}", "œ": "\\oe{}", "Œ": "\\OE{}", "å": "\\aa{}", "Å": "\\AA{}", "ł": "\\l{}", "Ł": "\\L{}",
    "ı": "\\i{}",
}

# combining accents (of a Latin letter's canonical decomposition) by their LaTeX accent command
ACCENTS = {"\u0301": "\\'", "\u0300": "\\`", "\u0302": "\\^", "\u0308": '\\"', "\u0303": "\\~",
           "\u0327": "\\c", "\u030c": "\\v", "\u030a": "\\r", "\u0304": "\\=", "\u0306": "\\u",
           "\u030b": "\\H", "\u0307": "\\."}

# a number standing alone (not part of a name such as Qwen3-8B or 3.11B): its sign (- + or U+2212),
# digits with optional thousands commas and decimals, and an optional exponent
NUMBER = re.compile(r"(?<![\w.])([-+\u2212]?)(\d+(?:,\d{3})*(?:\.\d+)?)(?:[eE]([-+]?\d+))?(?!\w|\.\d)")

# a subscript after a lone letter (Latin or a Greek one MATH has): `Δ_grow`, `q_teacher`, `x_0`; not an
# underscore inside a name (`padding_free`, `auc_1k`)
GREEK = "".join(char for char in MATH if char.isalpha())
SUBSCRIPT = re.compile(rf"(?<![\w.])([A-Za-z{GREEK}])_([A-Za-z0-9]+)(?!\w)")

# the widths of a table in a one-column article (10pt): widths in pt, estimated from character counts
LINE_WIDTH = 345.0  # \linewidth
SHRINK = 0.9  # a tabular is shrunk to as little as this of its width (fit_to_width) rather than split
SMALL = 0.8  # \footnotesize (8pt) against 10pt
COLUMN_SEP = 12.0  # the padding of a column, 2 \tabcolsep
HEADER_CHARS = 10  # a column name wraps onto lines of at most this many characters
VALUE_CHARS = 28  # and a text value onto lines of this many
# a value with its spread (normgrow.paper.tables.Table.format): "mean ± std" or "mean [low, high]"
SPREAD = re.compile(r"(\S+) (± \S+|\[\S+, \S+\])")

Line = tuple[str, bool]  # one line of a cell: its text and whether it is set small


class UnmappedCharacter(ValueError):
    """A character the LaTeX writer has no mapping for, named with its code point."""

    def __init__(self, char: str, text: str, where: str = ""):
        self.char, self.text, self.where = char, text, where
        name = unicodedata.name(char, "unnamed")
        place = f"{where}: " if where else ""
        super().__init__(f"{place}character {char!r} (U+{ord(char):04X} {name}) in {text!r} has no LaTeX mapping; "
                         "add one to normgrow.paper.latex (MATH, TEXT or ACCENTS)")


def character(char: str, text: str = "", where: str = "") -> str:
    """One character as LaTeX: itself (plain ASCII), escaped (LaTeX's specials), a math symbol, a
    text symbol or an accented letter; refused (`UnmappedCharacter`) otherwise."""
    if char in ASCII:
        return ASCII[char]
    if char.isascii():
        if char.isprintable() or char in "\n\t":
            return char
        raise UnmappedCharacter(char, text, where)
    if char in MATH:
        return f"${MATH[char]}$"
    if char in TEXT:
        return TEXT[char]
    base, *marks = unicodedata.normalize("NFD", char)
    if base.isascii() and base.isalpha() and marks and all(m in ACCENTS for m in marks):
        out = "\\i" if base == "i" else "\\j" if base == "j" else base
        for mark in marks:
            out = f"{ACCENTS[mark]}{{{out}}}"
        return out
    raise UnmappedCharacter(char, text, where)


def number(sign: str, digits: str, exponent: str | None) -> str:
    """A number in math mode: `$-0.0123$`, `$+0.05$`, `$1{,}234$`, `$10^{-8}$`, `$2.5\\times10^{-4}$`."""
    sign = "-" if sign == "\u2212" else sign
    digits = digits.replace(",", "{,}")
    if exponent is not None:
        power = f"10^{{{int(exponent)}}}"
        digits = power if digits == "1" else f"{digits}\\times{power}"
    return f"${sign}{digits}$"


def subscript(base: str, index: str) -> str:
    """A letter with its subscript in math mode: `$\\Delta_{\\mathrm{grow}}$`, `$x_{0}$` (a subscript
    of several characters is a word, upright)."""
    index = f"\\mathrm{{{index}}}" if len(index) > 1 else index
    return f"${MATH.get(base, base)}_{{{index}}}$"


def plain(text: str, where: str = "") -> str:
    """`text` as LaTeX without subscripts: numbers with a sign or an exponent in math mode (unsigned
    ones are the same glyphs in text), every other character mapped by `character`."""
    out, start = [], 0
    for match in NUMBER.finditer(text):
        sign, digits, exponent = match.groups()
        out += [character(c, text, where) for c in text[start:match.start()]]
        if sign or exponent is not None:
            out.append(number(sign, digits, exponent))
        else:
            out.append(digits)
        start = match.end()
    out += [character(c, text, where) for c in text[start:]]
    return "".join(out)


def latex(text, where: str = "") -> str:
    """`text` (any value; str() of it) as LaTeX for a table cell, caption or note: subscripts as math
    (`SUBSCRIPT`), the rest by `plain`; `where` names the table in the error for a character with no
    mapping."""
    text = str(text)
    out, start = [], 0
    for match in SUBSCRIPT.finditer(text):
        out += [plain(text[start:match.start()], where), subscript(*match.groups())]
        start = match.end()
    out.append(plain(text[start:], where))
    return "".join(out)


def stacked(lines: list[str], position: str = "t") -> str:
    """Lines of LaTeX one under the other in one right-aligned table cell (a tabular without side
    padding), aligned on its first line (`t`: a value over its spread) or its last (`b`: a header)."""
    return f"\\begin{{tabular}}[{position}]{{@{{}}r@{{}}}}" + " \\\\ ".join(lines) + "\\end{tabular}"


def fit_to_width(tabular: str) -> str:
    """A tabular shrunk to the line width where it is wider, never enlarged (graphicx's `\\resizebox`,
    whose width may name the box's own `\\width`)."""
    return "\\resizebox{\\ifdim\\width>\\linewidth\\linewidth\\else\\width\\fi}{!}{%\n" + tabular + "%\n}"


def wrap(text: str, chars: int) -> list[str]:
    """`text` on lines of at most `chars` characters, broken at spaces only (a word longer stays whole)."""
    return textwrap.wrap(text, chars, break_long_words=False, break_on_hyphens=False) or [""]


def header_lines(column: str) -> list[Line]:
    """A column's name as lines: a bracket on a line of its own ('AUC 2%' over '(mean)'), each part
    wrapped to HEADER_CHARS."""
    name, bracket, rest = column.partition(" (")
    parts = [name, f"({rest}"] if bracket else [name]
    return [(line, False) for part in parts for line in wrap(part, HEADER_CHARS)]


def value_lines(text: str) -> list[Line]:
    """A value as lines: one longer than HEADER_CHARS with a spread (`SPREAD`) as the mean over its spread,
    set small ('30 ± 0' stays on one line); a text wrapped to VALUE_CHARS."""
    match = SPREAD.fullmatch(text)
    if match and len(text) > HEADER_CHARS:
        return [(match[1], False), (match[2], True)]
    return [(line, False) for line in wrap(text, VALUE_CHARS)]


def text_width(text: str) -> float:
    """The estimated width of `text` at 10pt, from the widths of Computer Modern's characters: capitals
    (and capital Greek) 7.2pt, digits 5pt, lower case 4.9pt on average, spaces and punctuation less: a
    mean, so that a tabular is set in as few groups as fit (fit_to_width shrinks the one a little wider)."""
    narrow = {" ": 3.3, ".": 2.8, ",": 2.8, ":": 2.8, ";": 2.8, "'": 2.8, "(": 3.9, ")": 3.9, "[": 2.8,
              "]": 2.8, "/": 5.0}
    return sum(narrow.get(c, 7.2 if c.isupper() else 5.0 if c.isdigit() else 4.9 if c.islower() else 7.8)
               for c in text)


def width(lines: list[Line]) -> float:
    """The estimated width of a column holding `lines`, its padding included."""
    return max(text_width(text) * (SMALL if small else 1.0) for text, small in lines) + COLUMN_SEP


def column_groups(widths: dict[str, float], label_width: float) -> list[list[str]]:
    """The columns (by estimated width) in consecutive groups, each beside the row labels
    (`label_width`) no wider than the line once shrunk by SHRINK, where the columns allow: a group holds
    one column at least."""
    groups, used = [[]], label_width
    for column, column_width in widths.items():
        if groups[-1] and used + column_width > LINE_WIDTH / SHRINK:
            groups, used = [*groups, []], label_width
        groups[-1].append(column)
        used += column_width
    return groups


def cell(lines: list[Line], where: str = "", position: str = "t") -> str:
    """Lines as one table cell: a single line as it is, several `stacked` (small ones in \\footnotesize)."""
    tex = [("\\footnotesize " if small else "") + latex(text, where) for text, small in lines]
    return tex[0] if len(tex) == 1 else stacked(tex, position)
