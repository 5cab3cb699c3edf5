"""PyTorch helpers for L3 images: datasets, batch collate, worker set-up.

``import l3.torch`` (it needs torch; ``import l3`` alone does not).

The datasets read a tree of ``.l3`` files -- an l3fs mount of a PNG dataset, or
files written with ``l3 encode`` -- and decode a whole batch at once:

- **CPU decode in DataLoader workers** (the default): ``__getitems__`` reads
  the batch's files and decodes them with one ``l3.decode_batch(..., out=x)``
  call straight into ``x``, one tensor for the batch, allocated in shared
  memory when it runs in a worker. No per-image arrays, no stacking copy; the
  main process maps the worker's memory as it is.
- **GPU decode** (:func:`decode_on_gpu`): the workers only read bytes and the
  main process decodes each batch on the GPU (CUDA cannot be used in forked
  workers).

The documented default for CPU decode is a **uint8** batch (N, 3, H, W),
normalised by the consumer (:func:`normalize`, on the GPU after the copy):
uint8 is a quarter of float32's bytes through shared memory and over PCIe, and
``normalize(x)`` gives exactly the float32 values ``decode_batch(...,
dtype="float32", mean=..., std=...)`` would. The datasets take the same
format arguments as :func:`l3.decode_batch` when a float batch is wanted.

Files that are not L3 (a PNG left as it is on the mount, say label maps kept as
PNG with ``l3fs --exclude``) are decoded with Pillow into the same batch.
All images of one batch must have the same size (``l3.Error`` otherwise).

    import torch, l3.torch
    ds = l3.torch.ImageFolder("/mnt/train")             # ROOT/CLASS/**/*.l3
    loader = l3.torch.loader(ds, batch_size=32, num_workers=4)
    for x, y in loader:                                 # x: uint8 (32, 3, H, W)
        x = l3.torch.normalize(x.cuda(non_blocking=True))
"""

import math
import os
import random

import torch
import torch.utils.data

import l3

__all__ = [
    "IMAGENET_MEAN", "IMAGENET_STD", "Batched", "Cityscapes", "ImageFolder", "collate",
    "decode_on_gpu", "loader", "normalize", "webdataset_handler", "worker_init",
]

#: torchvision's ImageNet statistics, the usual ``Normalize()`` arguments.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

_DTYPES = {"uint8": torch.uint8, "float32": torch.float32, "float16": torch.float16}


def _in_worker():
    return torch.utils.data.get_worker_info() is not None


def _empty(shape, dtype, shared):
    """An uninitialised tensor; in shared memory when `shared` (what a worker
    hands to the main process without a copy: default_collate does the same)."""
    if not shared:
        return torch.empty(shape, dtype=dtype)
    t = torch.empty(0, dtype=dtype)
    storage = t._typed_storage() if hasattr(t, "_typed_storage") else t.storage()
    storage = storage._new_shared(math.prod(shape))
    return t.new(storage).resize_(shape)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _is_l3(buf):
    return buf[:4] == b"L3IM"


class Batched(tuple):
    """What a dataset's ``__getitems__`` returns: the batch, already collated
    (``(images, targets)``). :func:`collate` passes it through."""


class _Dataset(torch.utils.data.Dataset):
    """Common part: samples (path, target), the output format, batch decoding."""

    def __init__(self, *, layout="NCHW", dtype="uint8", channels=3, mean=None, std=None,
                 threads=None, decode=True):
        if layout not in ("NCHW", "NHWC"):
            raise ValueError(f"layout must be 'NCHW' or 'NHWC', not {layout!r}")
        if str(dtype).replace("torch.", "") not in _DTYPES:
            raise ValueError(f"dtype must be one of {sorted(_DTYPES)}, not {dtype!r}")
        self.layout = layout
        self.dtype = str(dtype).replace("torch.", "")
        self.channels = channels
        self.mean, self.std = mean, std
        self.threads = threads
        self.decode = decode
        self.samples = []

    def __len__(self):
        return len(self.samples)

    def _format(self):
        kw = dict(layout=self.layout, dtype=self.dtype, channels=self.channels)
        if self.mean is not None or self.std is not None:
            kw.update(mean=self.mean, std=self.std)
        return kw

    def _threads(self):
        if self.threads is not None:
            return self.threads
        # In a worker the other workers use the other cores: one thread each
        # (measured, docs/BENCHMARKS.md); in the main process, all of them.
        return 1 if _in_worker() else None

    def decode_images(self, bufs, paths=None, out=None):
        """Decodes `bufs` (a list of bytes) into one tensor (N, ...) in the
        dataset's format, `out` when given, else a new one (in shared memory
        inside a DataLoader worker). Non-L3 buffers go through Pillow."""
        fmt = self._format()
        l3_idx = [i for i, b in enumerate(bufs) if _is_l3(b)]
        first = bufs[l3_idx[0]] if l3_idx else None
        if first is not None:
            shape = _batch_shape(first, len(bufs), fmt)
        else:
            shape = _pil_shape(bufs[0], len(bufs), fmt)
        if out is None:
            out = _empty(shape, _DTYPES[self.dtype], shared=_in_worker())
        elif tuple(out.shape) != shape:
            raise ValueError(f"out has shape {tuple(out.shape)}, the batch needs {shape}")
        if len(l3_idx) == len(bufs):
            l3.decode_batch(bufs, out=out, threads=self._threads(), strict=True, **fmt)
        else:
            for i, b in enumerate(bufs):
                if _is_l3(b):
                    l3.decode_batch([b], out=out[i:i + 1], threads=self._threads(),
                                    strict=True, **fmt)
                else:
                    _pil_into(b, out[i], fmt, paths[i] if paths else f"item {i}")
        return out

    def _targets(self, targets):
        return torch.tensor(targets, dtype=torch.int64)

    def __getitem__(self, i):
        path, target = self.samples[i]
        buf = _read(path)
        if not self.decode:
            return buf, target
        x = self.decode_images([buf], [path])[0]
        return x, target

    def __getitems__(self, indices):
        """The whole batch at once: (images (N, ...), targets), decoded into one
        tensor (see the module's documentation)."""
        items = [self.samples[i] for i in indices]
        bufs = [_read(p) for p, _ in items]
        if not self.decode:
            return [(b, t) for b, (_, t) in zip(bufs, items)]
        images = self.decode_images(bufs, [p for p, _ in items])
        return Batched((images, self._targets([t for _, t in items])))


def _batch_shape(buf, n, fmt):
    info = l3.info(buf)
    c = fmt["channels"] or info["channels"]
    h, w = info["height"], info["width"]
    return (n, c, h, w) if fmt["layout"] == "NCHW" else (n, h, w, c)


def _pil_image(buf):
    import io
    from PIL import Image
    with Image.open(io.BytesIO(buf)) as im:
        import numpy as np
        return np.array(im)  # writable (torch.from_numpy warns on a read-only array)


def _pil_shape(buf, n, fmt):
    a = _pil_image(buf)
    c = fmt["channels"] or (1 if a.ndim == 2 else a.shape[2])
    h, w = a.shape[:2]
    return (n, c, h, w) if fmt["layout"] == "NCHW" else (n, h, w, c)


def _pil_into(buf, slot, fmt, what):
    """A non-L3 image (PNG...) decoded by Pillow into one slot of a batch:
    8-bit images, uint8 or float (x/255, then mean/std), channels as
    decode_batch forces them (gray repeated, alpha dropped or opaque)."""
    import numpy as np
    a = _pil_image(buf)
    if a.dtype != np.uint8:
        raise TypeError(f"{what}: not an L3 file and not an 8-bit image ({a.dtype})")
    if a.ndim == 2:
        a = a[:, :, None]
    c = a.shape[2]
    want = fmt["channels"] or c
    if want != c:
        if want == 3 and c in (1, 2):
            a = np.repeat(a[:, :, :1], 3, axis=2)
        elif want == 3 and c == 4:
            a = a[:, :, :3]
        elif want == 1 and c == 2:
            a = a[:, :, :1]
        elif want == 4 and c == 3:
            a = np.concatenate([a, np.full(a.shape[:2] + (1,), 255, np.uint8)], axis=2)
        else:
            raise ValueError(f"{what}: cannot make {want} channels of {c} with Pillow")
    x = torch.from_numpy(np.ascontiguousarray(a))
    if fmt["layout"] == "NCHW":
        x = x.permute(2, 0, 1)
    if fmt["dtype"] != "uint8":
        x = x.to(torch.float32).div_(255.0)
        if fmt.get("mean") is not None:
            m = torch.tensor(_per_channel(fmt["mean"], want), dtype=torch.float32)
            s = torch.tensor(_per_channel(fmt["std"], want), dtype=torch.float32)
            shape = (-1, 1, 1) if fmt["layout"] == "NCHW" else (1, 1, -1)
            x = x.sub_(m.view(shape)).div_(s.view(shape))
    slot.copy_(x)


def _per_channel(v, c):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return (v + [v[-1]] * c)[:c]


def _walk(top, exts):
    out = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out += [os.path.join(dirpath, f) for f in sorted(filenames)
                if not f.startswith(".") and f.lower().endswith(exts)]
    return out


class ImageFolder(_Dataset):
    """``ROOT/CLASS/**/NAME.l3`` -> (image, class index), like torchvision's
    ImageFolder (classes sorted by name; files directly under ROOT form a class
    of their own, named ``"."``).

    Keyword arguments: the output format of :func:`l3.decode_batch`
    (``layout="NCHW"``, ``dtype="uint8"``, ``channels=3``, ``mean``, ``std``),
    ``threads`` (decode threads; default 1 in a worker, all CPUs otherwise),
    ``decode=False`` to hand over the files' bytes instead (GPU decode in the
    main process, :func:`decode_on_gpu`), ``extensions`` (default ``(".l3",)``;
    add ``".png"`` for a tree with PNGs decoded by Pillow).
    """

    def __init__(self, root, *, extensions=(".l3",), **fmt):
        super().__init__(**fmt)
        self.root = root
        exts = tuple(e.lower() for e in extensions)
        entries = sorted(os.scandir(root), key=lambda e: e.name)
        self.classes = [e.name for e in entries if e.is_dir() and not e.name.startswith(".")]
        top = [os.path.join(root, e.name) for e in entries
               if e.is_file() and not e.name.startswith(".") and e.name.lower().endswith(exts)]
        if top:
            self.classes.insert(0, ".")
            self.samples += [(p, 0) for p in top]
        for idx, cls in enumerate(self.classes):
            if cls != ".":
                self.samples += [(p, idx) for p in _walk(os.path.join(root, cls), exts)]
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        if not self.samples:
            raise FileNotFoundError(f"no {'/'.join(exts)} files under {root}")


class Cityscapes(_Dataset):
    """Semantic segmentation over a Cityscapes tree -> (image, label map).

    Images ``ROOT/leftImg8bit/SPLIT/CITY/X_leftImg8bit.l3``; label maps
    ``ROOT/gtFine/SPLIT/CITY/X_gtFine_labelIds.l3`` (or ``.png``, when the mount
    keeps them as PNG). Images without a label map are left out (counted in
    ``unlabelled``). A batch's targets are one uint8 tensor (N, H, W) of label
    ids, decoded like the images (convert with ``.long()`` on the consumer).
    Same keyword arguments as :class:`ImageFolder` (``extensions=(".png",)``
    reads the PNG tree itself, decoded by Pillow).
    """

    def __init__(self, root, split="train", *, target="labelIds", extensions=(".l3",),
                 **fmt):
        super().__init__(**fmt)
        self.root = root
        img_dir = os.path.join(root, "leftImg8bit", split)
        lbl_dir = os.path.join(root, "gtFine", split)
        suffixes = tuple("_leftimg8bit" + e.lower() for e in extensions)  # _walk lowercases
        self.unlabelled = 0
        for path in _walk(img_dir, suffixes):
            name = os.path.basename(path)
            suffix = next(x for x in suffixes if name.lower().endswith(x))
            stem = name[: -len(suffix)]
            city = os.path.join(lbl_dir, os.path.relpath(os.path.dirname(path), img_dir))
            label = None
            for ext in dict.fromkeys(tuple(e.lower() for e in extensions) + (".l3", ".png")):
                cand = os.path.join(city, f"{stem}_gtFine_{target}{ext}")
                if os.path.exists(cand):
                    label = cand
                    break
            if label is None:
                self.unlabelled += 1
                continue
            self.samples.append((path, label))
        if not self.samples:
            raise FileNotFoundError(f"no labelled *{'/'.join(suffixes)} images under {img_dir}")
        self._labels = _Dataset(layout="NHWC", dtype="uint8", channels=None,
                                threads=self.threads)

    def _targets(self, targets):
        bufs = [_read(p) for p in targets]
        y = self._labels.decode_images(bufs, targets)  # N, H, W, 1
        return y.view(y.shape[:3])

    def __getitem__(self, i):
        path, label = self.samples[i]
        if not self.decode:
            return _read(path), _read(label)
        x = self.decode_images([_read(path)], [path])[0]
        return x, self._targets([label])[0]

    def __getitems__(self, indices):
        items = [self.samples[i] for i in indices]
        if not self.decode:
            return [(_read(p), _read(t)) for p, t in items]
        images = self.decode_images([_read(p) for p, _ in items], [p for p, _ in items])
        return Batched((images, self._targets([t for _, t in items])))


def collate(samples):
    """DataLoader ``collate_fn`` for these datasets: a batch that
    ``__getitems__`` decoded (:class:`Batched`) passes through as
    ``(images, targets)``; a list of raw ``(bytes, target)`` items (datasets
    with ``decode=False``) stays a pair of lists; anything else goes to
    torch's ``default_collate``."""
    if isinstance(samples, Batched):
        return tuple(samples)
    if samples and isinstance(samples[0][0], (bytes, bytearray, memoryview)):
        imgs, tgts = zip(*samples)
        return list(imgs), list(tgts)
    return torch.utils.data.default_collate(samples)


def worker_init(worker_id):
    """DataLoader ``worker_init_fn``: one torch thread per worker (the
    workers share the cores) and Python's and NumPy's random generators
    seeded from the worker's torch seed (each worker otherwise inherits the
    same NumPy state through fork)."""
    seed = torch.initial_seed() % 2**32
    torch.set_num_threads(1)
    random.seed(seed)
    try:
        import numpy as np
        np.random.seed(seed)
    except ImportError:
        pass


def normalize(x, mean=IMAGENET_MEAN, std=IMAGENET_STD, dtype=torch.float32):
    """uint8 (N, C, H, W) -> float ``(x/255 - mean) / std`` on x's device: the
    consumer side of a uint8 hand-off, the same values as decoding with
    ``dtype="float32", mean=mean, std=std`` (same float32 operations)."""
    c = x.shape[1]
    m = torch.tensor(_per_channel(mean, c), dtype=torch.float32, device=x.device)
    s = torch.tensor(_per_channel(std, c), dtype=torch.float32, device=x.device)
    y = x.to(torch.float32).div_(255.0).sub_(m.view(1, -1, 1, 1)).div_(s.view(1, -1, 1, 1))
    return y if dtype == torch.float32 else y.to(dtype)


class decode_on_gpu:
    """Wraps a DataLoader over a dataset with ``decode=False`` (workers read
    bytes): each batch is decoded here, in the main process, on the GPU, on
    torch's current stream, in the dataset's format. Iterates like the loader;
    ``len()`` is the loader's."""

    def __init__(self, loader, device="cuda", dataset=None):
        self.loader = loader
        self.dataset = dataset or loader.dataset
        self.device = device

    def __len__(self):
        return len(self.loader)

    def _decode(self, bufs, fmt):
        dev = torch.device(self.device)
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        stream = torch.cuda.current_stream(dev).cuda_stream
        batch = l3.decode_batch(bufs, device=f"cuda:{dev.index}", stream=stream, strict=True,
                                **fmt)
        return torch.from_dlpack(batch)

    def __iter__(self):
        ds = self.dataset
        for imgs, tgts in self.loader:
            x = self._decode(imgs, ds._format())
            if isinstance(tgts[0], (bytes, bytearray, memoryview)):
                y = self._decode(tgts, dict(layout="NHWC", dtype="uint8", channels=None))
                y = y.view(y.shape[:3])
            else:
                y = torch.tensor(tgts, dtype=torch.int64, device=x.device)
            yield x, y


def loader(dataset, batch_size, *, num_workers=2, shuffle=True, drop_last=True,
           device="cpu", **kw):
    """A DataLoader for these datasets: batch decode in the workers
    (``device="cpu"``), or bytes from the workers and the GPU decode in the main
    process (``device="cuda"``: the dataset is switched to ``decode=False``).
    Other keyword arguments go to DataLoader."""
    kw.setdefault("persistent_workers", num_workers > 0)
    if str(device).startswith("cuda"):
        dataset.decode = False
    common = dict(batch_size=batch_size, shuffle=shuffle, num_workers=num_workers,
                  drop_last=drop_last, collate_fn=collate,
                  worker_init_fn=worker_init if num_workers else None, **kw)
    dl = torch.utils.data.DataLoader(dataset, **common)
    if str(device).startswith("cuda"):
        return decode_on_gpu(dl, device, dataset)
    return dl


def webdataset_handler(layout="CHW", dtype="uint8", channels=None, **fmt):
    """A WebDataset decoder handler for ``.l3`` members: a function of (key,
    bytes) that returns the decoded tensor for keys ending in ``l3`` and None
    otherwise (WebDataset then tries its other handlers)::

        ds = wds.WebDataset(urls).decode(l3.torch.webdataset_handler(), "pil")

    `layout` is ``"CHW"`` or ``"HWC"``; the other arguments as for
    :func:`l3.decode_batch`. One thread (WebDataset decodes in its workers)."""
    if layout not in ("CHW", "HWC"):
        raise ValueError(f"layout must be 'CHW' or 'HWC', not {layout!r}")
    kw = dict(layout="N" + layout, dtype=dtype, channels=channels, **fmt)

    def handler(key, data):
        if key.rsplit(".", 1)[-1].lower() != "l3":
            return None
        return torch.from_dlpack(l3.decode_batch([data], threads=1, strict=True, **kw))[0]

    return handler
