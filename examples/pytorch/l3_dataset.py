"""PyTorch datasets and a batch-decoding collate function for an l3fs mount.

An l3fs mount shows every PNG of a dataset as a ``.l3`` file with the same pixels.
The datasets here only *read bytes* (cheap, in DataLoader workers); the whole
batch is then decoded by ``l3.decode_batch``:

- on a CUDA GPU: the workers hand over the raw bytes and the main process
  decodes the batch in one call straight into an NCHW float tensor on the GPU
  (CUDA cannot be used in forked DataLoader workers);
- without a GPU: the collate function decodes the batch on the CPU inside the
  worker processes, which then hand over ready tensors.

The same classes also read a plain PNG tree (``ext=".png"``): PNGs are decoded
with PIL in ``__getitem__``, which is what a PyTorch loader does today. Both
paths produce identical tensors, so a model cannot tell them apart.

Layouts:

- ``ImageFolderL3``: ``ROOT/CLASS/**/NAME.l3`` -> (image, class index), like
  ``torchvision.datasets.ImageFolder``; files directly under ROOT form a class
  of their own (named ``"."``).
- ``CityscapesL3``: ``ROOT/leftImg8bit/SPLIT/CITY/X_leftImg8bit.l3`` with its
  label map ``ROOT/gtFine/SPLIT/CITY/X_gtFine_labelIds.l3`` -> (image, label
  map). Label maps may also stay PNG on the mount (``l3fs --exclude
  '*_labelIds.png'``); they are then decoded with PIL in the workers.

All images of one batch must have the same size (as in Cityscapes); the
collate function raises ``l3.Error`` otherwise.
"""

import os

import numpy as np
import torch
import torch.utils.data

import l3

# torchvision's ImageNet statistics, the usual Normalize() arguments.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

IGNORE_INDEX = 255


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _is_image(name, ext):
    return name.lower().endswith(ext) and not name.startswith(".")


class ImageFolderL3(torch.utils.data.Dataset):
    """Classification dataset: ``ROOT/CLASS/**/NAME{ext}`` -> (image, class index).

    With ``ext=".l3"`` an item's image is the file's bytes (decoded later, per
    batch, by :class:`L3Collate`); with ``ext=".png"`` it is a HWC uint8 numpy
    array decoded by PIL here.
    """

    def __init__(self, root, ext=".l3"):
        self.root = root
        self.ext = ext.lower()
        entries = sorted(os.scandir(root), key=lambda e: e.name)
        self.classes = [e.name for e in entries if e.is_dir() and not e.name.startswith(".")]
        self.samples = []
        top = [os.path.join(root, e.name) for e in entries
               if e.is_file() and _is_image(e.name, self.ext)]
        if top:
            self.classes.insert(0, ".")
            self.samples += [(p, 0) for p in top]
        for idx, cls in enumerate(self.classes):
            if cls == ".":
                continue
            for dirpath, dirnames, filenames in os.walk(os.path.join(root, cls)):
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
                for name in sorted(filenames):
                    if _is_image(name, self.ext):
                        self.samples.append((os.path.join(dirpath, name), idx))
        if not self.samples:
            raise FileNotFoundError(f"no {self.ext} files under {root}")

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, target = self.samples[i]
        return load_image(path), target


class CityscapesL3(torch.utils.data.Dataset):
    """Semantic segmentation over a Cityscapes tree -> (image, label map).

    Images: ``ROOT/leftImg8bit/SPLIT/CITY/X_leftImg8bit{ext}``; label maps:
    ``ROOT/gtFine/SPLIT/CITY/X_gtFine_labelIds.l3`` or ``.png`` (whichever the
    mount shows). Images without a label map are left out.
    """

    def __init__(self, root, split="train", ext=".l3"):
        self.root = root
        self.ext = ext.lower()
        img_dir = os.path.join(root, "leftImg8bit", split)
        lbl_dir = os.path.join(root, "gtFine", split)
        suffix = "_leftImg8bit" + self.ext
        self.samples = []
        self.unlabelled = 0
        for dirpath, dirnames, filenames in os.walk(img_dir):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                if not name.lower().endswith(suffix.lower()):
                    continue
                stem = name[: -len(suffix)]
                city_dir = os.path.join(lbl_dir, os.path.relpath(dirpath, img_dir))
                label = None
                for lext in (self.ext, ".l3", ".png"):
                    cand = os.path.join(city_dir, stem + "_gtFine_labelIds" + lext)
                    if os.path.exists(cand):
                        label = cand
                        break
                if label is None:
                    self.unlabelled += 1
                    continue
                self.samples.append((os.path.join(dirpath, name), label))
        if not self.samples:
            raise FileNotFoundError(f"no labelled *{suffix} images under {img_dir}")

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        image, label = self.samples[i]
        return load_image(image), load_image(label)


def load_image(path):
    """An .l3 file as bytes (decoded per batch later); a PNG decoded with PIL."""
    if path.lower().endswith(".l3"):
        return _read(path)
    from PIL import Image
    with Image.open(path) as im:
        # Same samples as libpng (and l3.decode): palette stays indices.
        return np.asarray(im)


class L3Collate:
    """Turns a list of dataset items into (images, targets) tensors.

    images: float32 NCHW, ``(x/255 - mean) / std`` per channel, 3 channels
    (gray expanded, alpha dropped) — torchvision's ToTensor() + Normalize().
    With ``dtype="uint8"`` and no normalisation: uint8 NCHW samples.

    targets: int64 class indices (N,) or label maps (N, H, W); label ids
    ``>= num_classes`` become ``IGNORE_INDEX``.

    ``device="cpu"`` decodes here (in a DataLoader worker, one thread each, or
    with all cores in the main process); ``device="cuda"`` must be called in
    the main process (see :func:`make_loader`).
    """

    def __init__(self, device="cpu", dtype="float32", mean=IMAGENET_MEAN, std=IMAGENET_STD,
                 channels=3, num_classes=None, threads=None):
        self.device = device
        self.dtype = dtype
        self.mean = mean if dtype.startswith("float") else None
        self.std = std if dtype.startswith("float") else None
        self.channels = channels
        self.num_classes = num_classes
        self.threads = threads

    def _threads(self):
        if self.threads is not None:
            return self.threads
        # Several workers already use the cores; one decode thread each.
        return 1 if torch.utils.data.get_worker_info() is not None else None

    def _decode(self, bufs, dtype, channels, mean, std):
        kw = {}
        if mean is not None:
            kw.update(mean=list(mean), std=list(std))
        if channels is not None:
            kw["channels"] = channels
        device = self.device
        if device == "cpu":
            kw["threads"] = self._threads()
        else:
            if device == "cuda":
                device = f"cuda:{torch.cuda.current_device()}"
            # Decode on torch's current stream of that device: ordered with
            # whatever consumes the tensor next, no synchronisation needed.
            kw["stream"] = torch.cuda.current_stream(torch.device(device)).cuda_stream
        batch = l3.decode_batch(bufs, device=device, layout="NCHW", dtype=dtype,
                                strict=True, **kw)
        x = torch.from_dlpack(batch)
        if device == "cpu" and torch.utils.data.get_worker_info() is not None:
            # In a worker the batch travels to the main process through shared
            # memory: put it there once, as default_collate does.
            shared = torch.empty(x.shape, dtype=x.dtype).share_memory_()
            x = shared.copy_(x)
        return x

    def images(self, items):
        if isinstance(items[0], (bytes, bytearray, memoryview)):
            return self._decode(items, self.dtype, self.channels, self.mean, self.std)
        # PIL-decoded arrays (PNG tree): the reference path, done with torch.
        x = torch.from_numpy(np.stack([_to_channels(a, self.channels) for a in items]))
        x = x.permute(0, 3, 1, 2).contiguous().to(self.device)
        if not self.dtype.startswith("float"):
            return x
        return normalize(x, self.mean, self.std).to(getattr(torch, self.dtype))

    def targets(self, items):
        if isinstance(items[0], int):
            return torch.tensor(items, dtype=torch.int64, device=self.device)
        if isinstance(items[0], (bytes, bytearray, memoryview)):
            y = self._decode(items, "uint8", None, None, None)  # N,1,H,W class ids
        else:
            y = torch.from_numpy(np.stack(items)).unsqueeze(1).to(self.device)
        y = y[:, 0].to(torch.int64)
        if self.num_classes is not None:
            y = torch.where(y < self.num_classes, y, torch.full_like(y, IGNORE_INDEX))
        return y

    def __call__(self, samples):
        imgs, tgts = zip(*samples)
        return self.images(list(imgs)), self.targets(list(tgts))


def _to_channels(a, channels):
    """HWC uint8 array with `channels` channels (PIL path; 8-bit sources)."""
    if a.ndim == 2:
        a = a[:, :, None]
    if a.dtype != np.uint8:
        raise TypeError(f"PIL path handles 8-bit images only, got {a.dtype}")
    c = a.shape[2]
    if channels is None or channels == c:
        return a
    if channels == 3 and c in (1, 2):
        return np.repeat(a[:, :, :1], 3, axis=2)
    if channels == 3 and c == 4:
        return a[:, :, :3]
    raise ValueError(f"cannot convert {c} channels to {channels}")


def normalize(x, mean=IMAGENET_MEAN, std=IMAGENET_STD):
    """uint8 NCHW -> float32 (x/255 - mean) / std, on x's device: the same values
    L3Collate's float32 output has (for loaders that move uint8 batches)."""
    m = torch.tensor(mean, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    s = torch.tensor(std, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    return x.to(torch.float32).div_(255.0).sub_(m).div_(s)


def collate_bytes(samples):
    """Collate that keeps the raw items (for decoding on the GPU in the main process)."""
    imgs, tgts = zip(*samples)
    return list(imgs), list(tgts)


class _DecodeInMain:
    """Wraps a DataLoader whose workers only read bytes; decodes each batch here."""

    def __init__(self, loader, collate):
        self.loader = loader
        self.collate = collate
        self.dataset = loader.dataset

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        for imgs, tgts in self.loader:
            yield self.collate.images(imgs), self.collate.targets(tgts)


def default_device():
    """'cuda' when this l3 build and torch both see a GPU, else 'cpu'."""
    if torch.cuda.is_available() and l3.cuda_available():
        return "cuda"
    return "cpu"


def make_loader(dataset, batch_size, device=None, num_workers=2, shuffle=True,
                num_classes=None, drop_last=True, **collate_kw):
    """A loader yielding (images, targets) on `device` (default: GPU when present).

    CPU: workers read and decode (L3Collate runs in the workers).
    CUDA: workers read bytes, the batch is decoded on the GPU in the main process.
    """
    device = device or default_device()
    collate = L3Collate(device=device, num_classes=num_classes, **collate_kw)
    common = dict(batch_size=batch_size, shuffle=shuffle, num_workers=num_workers,
                  drop_last=drop_last, persistent_workers=num_workers > 0)
    if device == "cpu":
        return torch.utils.data.DataLoader(dataset, collate_fn=collate, **common)
    loader = torch.utils.data.DataLoader(dataset, collate_fn=collate_bytes,
                                         pin_memory=False, **common)
    return _DecodeInMain(loader, collate)
