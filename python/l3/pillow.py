"""Pillow plugin: ``PIL.Image.open`` reads L3 files.

Registered by ``import l3`` when Pillow is importable, or explicitly with
``l3.register_pillow()``. Files are recognised by their first four bytes
(``L3IM``), not by their name: ``x.l3``, an L3 file named ``x.png`` (l3fs's
keep-names option) or one with no extension at all open the same way.

``Image.open(l3_file)`` gives the mode, size, pixels and transparency that
Pillow gives for the PNG the file was made from (Pillow 9.4, Debian 12):

==========================  ========  =========================================
source PNG                  mode      pixels
==========================  ========  =========================================
gray 1-bit                  ``1``     0/1 (numpy: bool)
gray 2-, 4-bit              ``L``     scaled to 0..255 (x85, x17), as Pillow does
gray 8-bit                  ``L``
gray 16-bit                 ``I``     the 16-bit values (numpy: int32). Pillow
                                      >= 10 calls this ``I;16``; the plugin
                                      follows the installed Pillow's PNG plugin
gray + alpha 8-bit          ``LA``
gray + alpha 16-bit         ``RGBA``  high bytes, gray copied to R, G, B (Pillow)
RGB 8-bit / RGBA 8-bit      ``RGB`` / ``RGBA``
RGB 16 / RGBA 16-bit        ``RGB`` / ``RGBA``  high bytes (Pillow reduces to 8 bits)
palette 1/2/4/8-bit         ``P``     indices; ``getpalette()`` is the PLTE
                                      colours; ``info["transparency"]`` as Pillow
                                      sets it (an index, or the tRNS bytes)
==========================  ========  =========================================

Gray and RGB images with a tRNS colour key have ``info["transparency"]`` (an
int, or an (r, g, b) tuple) as Pillow gives it. ``convert("RGB")`` etc. then
work as for the PNG. Pillow's other PNG info entries (gamma, dpi, text) are not
kept by L3.

A torchvision ``ImageFolder`` reads an l3fs mount with one extra argument::

    ImageFolder(root, is_valid_file=l3.pillow.is_l3_file)

(with the keep-names mount option, unchanged: the files keep ``.png`` names).
"""
import numpy as np
from PIL import Image, ImageFile, ImagePalette

from . import _l3

MAGIC = b"L3IM"
FORMAT = "L3"

__all__ = ["L3ImageFile", "MAGIC", "is_l3_file", "register"]


def _accept(prefix):
    return prefix[:4] == MAGIC


def is_l3_file(path):
    """True when the file at PATH starts with the L3 magic (any extension).

    Meant for ``torchvision.datasets.ImageFolder(root, is_valid_file=...)``.
    """
    try:
        with open(path, "rb") as f:
            return _accept(f.read(4))
    except OSError:
        return False


# (colour, bit depth) -> Pillow mode, as PIL.PngImagePlugin maps PNG types
def _mode(info):
    color, depth = info["color"], info["bit_depth"]
    if color == "gray":
        return {1: "1", 16: "I"}.get(depth, "L")
    if color == "gray_alpha":
        return "LA" if depth <= 8 else "RGBA"
    if color == "rgb":
        return "RGB"
    if color == "rgba":
        return "RGBA"
    return "P"


def _raw(data, info):
    """Decodes DATA to the bytes of Pillow's image and their raw mode."""
    a = _l3.decode(data)
    color, depth = info["color"], info["bit_depth"]
    if color == "gray":
        a = a[..., 0]
        if depth == 1:
            return a.tobytes(), "1;8"
        if depth in (2, 4):
            return (a * (85 if depth == 2 else 17)).astype(np.uint8).tobytes(), "L"
        if depth == 16:
            return a.astype("<u2").tobytes(), "I;16"
        return a.tobytes(), "L"
    if color == "palette":
        return a.tobytes(), "P"
    if depth == 16:
        a = (a >> 8).astype(np.uint8)  # Pillow keeps the high bytes
        if color == "gray_alpha":
            g, alpha = a[..., 0], a[..., 1]
            return np.stack([g, g, g, alpha], axis=-1).tobytes(), "RGBA"
    return a.tobytes(), {"gray_alpha": "LA", "rgb": "RGB", "rgba": "RGBA"}[color]


def _transparency(info):
    """info["transparency"] as PIL.PngImagePlugin sets it, or None."""
    if info["color"] == "palette":
        n = info["palette_alpha_len"]
        if not n:
            return None
        trns = bytes(e[3] for e in info["palette"][:n])
        if trns.count(0) == 1 and trns.count(255) == n - 1:
            return trns.index(0)  # one fully transparent entry, the rest opaque
        if trns.count(255) == n:
            return None  # Pillow's rule finds no transparent index
        return trns
    key = info["trns_key"]
    if key is None:
        return None
    return key[0] if info["color"] == "gray" else tuple(key)


class _L3Decoder(ImageFile.PyDecoder):
    """Decodes a whole L3 file (passed as the tile's argument) in one call."""

    _pulls_fd = True

    def decode(self, buffer):
        data, info = self.args
        raw, rawmode = _raw(data, info)
        self.set_as_raw(raw, rawmode)
        return -1, 0


class L3ImageFile(ImageFile.ImageFile):
    """An L3 file opened by Pillow (see the module documentation for modes)."""

    format = FORMAT
    format_description = "L3 lossless image"

    def _open(self):
        data = self.fp.read()
        if not _accept(data):
            raise SyntaxError("not an L3 file")
        try:
            info = _l3.info(data)
        except _l3.Error as e:
            raise SyntaxError(f"broken L3 file: {e}") from e
        mode = _mode(info)
        if isinstance(getattr(type(self), "mode", None), property):
            self._mode = mode  # Pillow >= 10
        else:
            self.mode = mode
        self._size = (info["width"], info["height"])
        if mode == "P":
            rgb = bytes(c for e in info["palette"] for c in e[:3])
            self.palette = ImagePalette.raw("RGB", rgb)
        t = _transparency(info)
        if t is not None:
            self.info["transparency"] = t
        self.tile = [("l3", (0, 0) + self.size, 0, (data, info))]


_registered = False


def register():
    """Registers the plugin with Pillow (idempotent)."""
    global _registered
    if _registered:
        return
    Image.register_decoder("l3", _L3Decoder)
    Image.register_open(FORMAT, L3ImageFile, _accept)
    Image.register_extension(FORMAT, ".l3")
    Image.register_mime(FORMAT, "image/x-l3")
    _registered = True
