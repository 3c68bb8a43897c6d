"""Text and numbers as pdflatex reads them: the `.tex` tables (normgrow.paper.tables) are compiled
by pdflatex with booktabs, which stops at any character outside ASCII that LaTeX has no definition
for ("Unicode character ... not set up for use with LaTeX").

Every non-ASCII character is mapped to LaTeX here (symbols in math mode: `$\\Sigma$`, `$\\approx$`),
accented Latin letters to their accent commands (`é` → `\\'{e}`), and any other one is refused by
name (`UnmappedCharacter`) rather than written. LaTeX's special characters (`_ % & # $ { } ~ ^ \\`)
are escaped. Signed numbers are typeset as numbers, in math mode with a math minus (`-0.0123` →
`$-0.0123$`; a text hyphen would print as a hyphen), and scientific notation as a power of ten
(`1e-08` → `$10^{-8}$`, `$2.5\\times10^{-4}$`).
"""

from __future__ import annotations

import re
import unicodedata

# ASCII characters that LaTeX reads as commands, or prints as another glyph in its default (OT1) font
ASCII = {"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "_": "\\_", "#": "\\#", "$": "\\$", "{": "\\{",
         "}": "\\}", "~": "\\textasciitilde{}", "^": "\\textasciicircum{}", "<": "$<$", ">": "$>$", "|": "$|$"}

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


def latex(text, where: str = "") -> str:
    """`text` (any value; str() of it) as LaTeX for a table cell, caption or note. Numbers with a
    sign or an exponent are typeset in math mode (unsigned ones are the same glyphs in text);
    `where` names the table in the error for a character with no mapping."""
    text = str(text)
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
