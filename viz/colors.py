"""Colours and labels for sequences: colour-blind safe (Okabe–Ito) and stable, so sequence 2 is the same colour on
every page and at every step."""

from __future__ import annotations

# Okabe & Ito (2008), "Color Universal Design". Black is kept for outlines and text, not for sequences.
OKABE_ITO = {
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
    "black": "#000000",
}
SEQUENCE_COLORS = tuple(c for name, c in OKABE_ITO.items() if name != "black")  # 7 colours, cycled by seq id

FREE_COLOR = "#EEEEEE"      # a free physical block
RESERVED_ALPHA = 0.35       # a slot owned by a sequence but not written yet (tail of its last block)
HIGHLIGHT_COLOR = "#000000"  # outline of the cell being read / written
# diffs: red below zero, white at zero, blue above (ColorBrewer RdBu, colour-blind safe). Spelled out, so a
# renderer's theme cannot swap a named scale for its own.
DIVERGING_SCALE = [[i / 10, c] for i, c in enumerate(
    ["#67001F", "#B2182B", "#D6604D", "#F4A582", "#FDDBC7", "#F7F7F7", "#D1E5F0", "#92C5DE", "#4393C3", "#2166AC",
     "#053061"])]


def seq_color(seq_id: int) -> str:
    """The colour of sequence `seq_id` (hex), the same everywhere."""
    return SEQUENCE_COLORS[seq_id % len(SEQUENCE_COLORS)]


def seq_label(seq_id: int) -> str:
    """A, B, C, … Z, then S26, S27, … (ids 0, 1, 2 are the seed article's sequences A, B, C)."""
    return chr(ord("A") + seq_id) if 0 <= seq_id < 26 else f"S{seq_id}"


def luminance(hex_color: str) -> float:
    """WCAG relative luminance of `hex_color` ("#RRGGBB"): 0 (black) … 1 (white). Raises: ValueError for a
    colour that is not 6 hex digits."""
    digits = hex_color.lstrip("#")
    if len(digits) != 6:
        raise ValueError(f"colour must be #RRGGBB, got {hex_color!r}")
    r, g, b = (int(digits[i:i + 2], 16) / 255 for i in (0, 2, 4))
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (r, g, b)]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast_ratio(a: str, b: str) -> float:
    """WCAG contrast ratio of two colours, 1 … 21 (AA asks >= 4.5 for normal text, >= 3 for large text).
    Raises: ValueError as luminance."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def text_color(hex_color: str) -> str:
    """Black or white, whichever has the higher contrast ratio on `hex_color` (on every colour one of them has
    at least 4.58:1). Raises: ValueError as luminance."""
    black, white = "#000000", "#FFFFFF"
    return black if contrast_ratio(black, hex_color) >= contrast_ratio(white, hex_color) else white


def ink(hex_color: str, background: str = "#FFFFFF", ratio: float = 4.5) -> str:
    """`hex_color` darkened (mixed with black) just enough to be read as text on `background` (contrast >= `ratio`):
    Okabe–Ito vermillion #D55E00 as text on white becomes #C25600. Colours that already read are returned as
    they are. Raises: ValueError as luminance."""
    rgb = [int(hex_color.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4)]
    for k in range(101):
        out = "#" + "".join(f"{round(c * (1 - k / 100)):02X}" for c in rgb)
        if contrast_ratio(out, background) >= ratio:
            return out
    return "#000000"


def tint(hex_color: str, alpha: float) -> str:
    """`hex_color` blended with white (alpha 1 = the colour, 0 = white), as hex."""
    rgb = [int(hex_color.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4)]
    return "#" + "".join(f"{round(255 - alpha * (255 - c)):02X}" for c in rgb)
