"""Colour distances as people see them: sRGB to CIELAB (D65), CIE76 and CIEDE2000, and
what a protanope or deuteranope sees (Machado, Oliveira and Fernandes 2009, severity 1).

Written from the published formulas, not from our palette's code: Sharma, Wu and Dalal
(2005) for CIEDE2000 (their test pairs check it in tests/test_dashboard_palette.py), the
sRGB standard (IEC 61966-2-1) for the transfer curve, and Machado et al.'s matrices, which
act on linear RGB.
"""
from __future__ import annotations

import re

import numpy as np

# Machado et al. 2009, Table 1, severity 1.0: linear RGB -> what the dichromat sees.
CVD = {
    "normal": np.eye(3),
    "protanopia": np.array([[0.152286, 1.052583, -0.204868],
                            [0.114503, 0.786281, 0.099216],
                            [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968],
                              [0.280085, 0.672501, 0.047413],
                              [-0.011820, 0.042940, 0.968881]]),
}
# sRGB (linear) to XYZ, D65, and the D65 white point.
_M = np.array([[0.4124564, 0.3575761, 0.1804375],
               [0.2126729, 0.7151522, 0.0721750],
               [0.0193339, 0.1191920, 0.9503041]])
_WHITE = np.array([0.95047, 1.0, 1.08883])


def parse(colour: str, background=(255, 255, 255)) -> np.ndarray:
    """``#rrggbb`` or ``rgba(r,g,b,a)`` as sRGB in [0, 1]; a translucent colour as drawn over
    ``background`` (the timeline's white)."""
    c = colour.strip()
    if c.startswith("#") and len(c) == 7:
        return np.array([int(c[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.float64) / 255
    m = re.fullmatch(r"rgba?\(([^)]*)\)", c)
    if not m:
        raise ValueError(f"not a colour: {colour!r}")
    parts = [float(p) for p in m.group(1).split(",")]
    rgb, a = np.array(parts[:3]), (parts[3] if len(parts) == 4 else 1.0)
    return (a * rgb + (1 - a) * np.asarray(background, dtype=np.float64)) / 255


def to_linear(srgb: np.ndarray) -> np.ndarray:
    s = np.asarray(srgb, dtype=np.float64)
    return np.where(s <= 0.04045, s / 12.92, ((s + 0.055) / 1.055) ** 2.4)


def lab(srgb: np.ndarray, vision: str = "normal") -> np.ndarray:
    """CIELAB (D65) of an sRGB colour, as seen with ``vision``."""
    rgb = np.clip(CVD[vision] @ to_linear(srgb), 0.0, 1.0)
    xyz = (_M @ rgb) / _WHITE
    d = 6 / 29
    f = np.where(xyz > d ** 3, np.cbrt(xyz), xyz / (3 * d * d) + 4 / 29)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def cie76(lab1: np.ndarray, lab2: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(lab1) - np.asarray(lab2)))


def ciede2000(lab1, lab2) -> float:
    """CIEDE2000 colour difference (kL = kC = kH = 1), as Sharma et al. 2005 state it."""
    L1, a1, b1 = map(float, lab1)
    L2, a2, b2 = map(float, lab2)
    C1, C2 = np.hypot(a1, b1), np.hypot(a2, b2)
    Cm = (C1 + C2) / 2
    G = 0.5 * (1 - np.sqrt(Cm ** 7 / (Cm ** 7 + 25.0 ** 7)))
    a1p, a2p = (1 + G) * a1, (1 + G) * a2
    C1p, C2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p = np.degrees(np.arctan2(b1, a1p)) % 360 if C1p else 0.0
    h2p = np.degrees(np.arctan2(b2, a2p)) % 360 if C2p else 0.0
    dLp, dCp = L2 - L1, C2p - C1p
    if C1p * C2p == 0:
        dhp = 0.0
    elif abs(h2p - h1p) <= 180:
        dhp = h2p - h1p
    else:
        dhp = h2p - h1p - 360 if h2p > h1p else h2p - h1p + 360
    dHp = 2 * np.sqrt(C1p * C2p) * np.sin(np.radians(dhp / 2))
    Lpm, Cpm = (L1 + L2) / 2, (C1p + C2p) / 2
    if C1p * C2p == 0:
        hpm = h1p + h2p
    elif abs(h1p - h2p) <= 180:
        hpm = (h1p + h2p) / 2
    else:
        hpm = (h1p + h2p + 360) / 2 if h1p + h2p < 360 else (h1p + h2p - 360) / 2
    T = (1 - 0.17 * np.cos(np.radians(hpm - 30)) + 0.24 * np.cos(np.radians(2 * hpm))
         + 0.32 * np.cos(np.radians(3 * hpm + 6)) - 0.20 * np.cos(np.radians(4 * hpm - 63)))
    dtheta = 30 * np.exp(-(((hpm - 275) / 25) ** 2))
    Rc = 2 * np.sqrt(Cpm ** 7 / (Cpm ** 7 + 25.0 ** 7))
    Sl = 1 + 0.015 * (Lpm - 50) ** 2 / np.sqrt(20 + (Lpm - 50) ** 2)
    Sc, Sh = 1 + 0.045 * Cpm, 1 + 0.015 * Cpm * T
    Rt = -np.sin(np.radians(2 * dtheta)) * Rc
    return float(np.sqrt((dLp / Sl) ** 2 + (dCp / Sc) ** 2 + (dHp / Sh) ** 2 + Rt * (dCp / Sc) * (dHp / Sh)))


def closest_pair(colours: dict[str, str], vision: str = "normal") -> tuple[float, str, str]:
    """The smallest CIEDE2000 difference between any two of ``colours`` (name -> colour) as
    seen with ``vision``, and the two names."""
    labs = {n: lab(parse(c), vision) for n, c in colours.items()}
    names = list(labs)
    best = (float("inf"), "", "")
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            d = ciede2000(labs[a], labs[b])
            if d < best[0]:
                best = (d, a, b)
    return best
