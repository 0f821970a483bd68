"""Datasets and loaders: the built-in synthetic CIFAR-shaped set (default, no download), CIFAR-10
in its python-pickle layout, and ImageFolder trees (an ImageNet subset)."""

from __future__ import annotations

import pickle
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler

from trace_report.capture.config import CaptureConfig
from trace_report.capture.models import MIN_IMAGE_SIZE
from trace_report.errors import InputError

CIFAR_MEAN = (0.4914, 0.4822, 0.4465)
CIFAR_STD = (0.2023, 0.1994, 0.2010)
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CIFAR_DIR = "cifar-10-batches-py"


class SyntheticCIFAR(Dataset):
    """Deterministic, learnable CIFAR-shaped images: a per-class low-frequency colour pattern
    plus per-sample uniform noise, stored as uint8 and normalised with the CIFAR statistics.

    The same ``seed`` gives the same class patterns for both splits; ``split`` picks the noise.
    """

    def __init__(
        self,
        size: int,
        *,
        num_classes: int = 10,
        image_size: int = 32,
        seed: int = 0,
        split: str = "train",
    ) -> None:
        patterns_rng = torch.Generator().manual_seed(seed)
        patterns = torch.rand(num_classes, 3, 4, 4, generator=patterns_rng)
        patterns = F.interpolate(patterns, size=image_size, mode="bilinear", align_corners=False)
        rng = torch.Generator().manual_seed(seed * 2 + (1 if split == "train" else 2))
        self.labels = torch.randint(0, num_classes, (size,), generator=rng)
        noise = torch.rand(size, 3, image_size, image_size, generator=rng)
        images = 0.6 * patterns[self.labels] + 0.4 * noise
        self.images = (images * 255).round().to(torch.uint8)
        self.mean = torch.tensor(CIFAR_MEAN).view(3, 1, 1)
        self.std = torch.tensor(CIFAR_STD).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = self.images[index].float().div_(255)
        return (image - self.mean) / self.std, int(self.labels[index])


class CIFAR10Pickle(Dataset):
    """CIFAR-10 read from ``cifar-10-batches-py`` (``data_batch_1..5``, ``test_batch``)."""

    def __init__(self, root: Path, *, train: bool, transform) -> None:
        folder = find_cifar_dir(root)
        names = [f"data_batch_{i}" for i in range(1, 6)] if train else ["test_batch"]
        arrays, labels = [], []
        for name in names:
            with open(folder / name, "rb") as fh:
                batch = pickle.load(fh, encoding="bytes")
            arrays.append(np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
            labels.extend(int(label) for label in batch[b"labels"])
        self.data = np.concatenate(arrays).transpose(0, 2, 3, 1)  # N x H x W x C
        self.labels = labels
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from PIL import Image

        return self.transform(Image.fromarray(self.data[index])), self.labels[index]


def find_cifar_dir(root: Path) -> Path:
    """The ``cifar-10-batches-py`` folder at or under ``root``; InputError when it is missing."""
    for folder in (root / CIFAR_DIR, root):
        needed = [folder / f"data_batch_{i}" for i in range(1, 6)] + [folder / "test_batch"]
        if all(path.is_file() for path in needed):
            return folder
    raise InputError(
        f"CIFAR-10 not found in {root} (expected {CIFAR_DIR}/data_batch_1..5 and test_batch); "
        "pass --download to fetch it"
    )


def image_size_for(cfg: CaptureConfig) -> int:
    """Input side in pixels: ``--image-size``, else the dataset's own, raised to the model's
    minimum (AlexNet needs 64)."""
    size = cfg.image_size or (224 if cfg.dataset == "imagefolder" else 32)
    return max(size, MIN_IMAGE_SIZE.get(cfg.model, 0))


def _cifar_transforms(size: int, *, train: bool):
    from torchvision import transforms as T

    steps = [T.Resize(size)] if size != 32 else []
    if train:
        steps += [T.RandomCrop(size, padding=4), T.RandomHorizontalFlip()]
    return T.Compose([*steps, T.ToTensor(), T.Normalize(CIFAR_MEAN, CIFAR_STD)])


def _imagenet_transforms(size: int, *, train: bool):
    from torchvision import transforms as T

    if train:
        steps = [T.RandomResizedCrop(size), T.RandomHorizontalFlip()]
    else:
        steps = [T.Resize(int(size * 256 / 224)), T.CenterCrop(size)]
    return T.Compose([*steps, T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def _image_folder(root: Path, size: int, *, train: bool) -> Dataset:
    from torchvision.datasets import ImageFolder

    names = ("train",) if train else ("val", "test")
    folder = next((root / n for n in names if (root / n).is_dir()), None)
    if folder is None:
        raise InputError(f"{root} has no {' or '.join(names)}/ folder of class sub-folders")
    try:
        return ImageFolder(str(folder), transform=_imagenet_transforms(size, train=train))
    except (FileNotFoundError, RuntimeError) as err:
        raise InputError(f"{folder}: {str(err).splitlines()[0]}") from None


def _download_cifar(root: Path) -> None:
    from torchvision.datasets import CIFAR10

    root.mkdir(parents=True, exist_ok=True)
    CIFAR10(str(root), train=True, download=True)
    CIFAR10(str(root), train=False, download=True)


def build_datasets(cfg: CaptureConfig, *, world_size: int = 1) -> tuple[Dataset, Dataset]:
    """(train, test) datasets for ``cfg.dataset``; downloads only when ``cfg.download``.

    The synthetic training set grows to at least ``--steps`` full batches per process.
    """
    size = image_size_for(cfg)
    if cfg.download and cfg.dataset != "cifar10":
        raise InputError("--download applies only to --dataset cifar10")
    if cfg.dataset == "synthetic":
        n_min = cfg.batch_size * cfg.steps * world_size
        common = {"num_classes": cfg.num_classes, "image_size": size, "seed": cfg.seed}
        return (
            SyntheticCIFAR(max(cfg.synthetic_train, n_min), split="train", **common),
            SyntheticCIFAR(cfg.synthetic_test, split="test", **common),
        )
    root = Path(cfg.data_dir)  # validate() guarantees data_dir for real datasets
    if cfg.dataset == "cifar10":
        if cfg.download:
            _download_cifar(root)
        return (
            CIFAR10Pickle(root, train=True, transform=_cifar_transforms(size, train=True)),
            CIFAR10Pickle(root, train=False, transform=_cifar_transforms(size, train=False)),
        )
    if not root.is_dir():
        raise InputError(f"--data-dir {root} is not a directory")
    return _image_folder(root, size, train=True), _image_folder(root, size, train=False)


@dataclass
class Loaders:
    """Training and test loaders, and the training sampler (``set_epoch`` under DDP)."""

    train: DataLoader
    test: DataLoader
    train_sampler: Sampler | None


def _seed_worker(worker_id: int) -> None:
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)
    random.seed(seed)


def _loader(dataset: Dataset, cfg: CaptureConfig, device: torch.device, **kwargs) -> DataLoader:
    workers = cfg.workers
    extra = {}
    if workers > 0:
        extra["persistent_workers"] = cfg.persistent_workers
        if cfg.prefetch_factor is not None:
            extra["prefetch_factor"] = cfg.prefetch_factor
    return DataLoader(
        dataset,
        batch_size=cfg.batch_size,
        num_workers=workers,
        pin_memory=cfg.pin_memory and device.type == "cuda",
        worker_init_fn=_seed_worker,
        generator=torch.Generator().manual_seed(cfg.seed),
        **extra,
        **kwargs,
    )


def build_loaders(
    cfg: CaptureConfig, device: torch.device, *, rank: int = 0, world_size: int = 1
) -> Loaders:
    """Loaders for ``cfg``; under DDP each rank reads its own shard of both splits."""
    train_set, test_set = build_datasets(cfg, world_size=world_size)
    per_rank = len(train_set) // world_size
    if per_rank < cfg.batch_size:
        raise InputError(
            f"--batch-size {cfg.batch_size} is larger than the training set per process "
            f"({per_rank} samples)"
        )
    train_sampler = test_sampler = None
    if world_size > 1:
        train_sampler = DistributedSampler(
            train_set, world_size, rank, shuffle=True, seed=cfg.seed, drop_last=True
        )
        test_sampler = DistributedSampler(test_set, world_size, rank, shuffle=False)
    train = _loader(
        train_set, cfg, device, sampler=train_sampler, shuffle=train_sampler is None,
        drop_last=True,
    )
    test = _loader(test_set, cfg, device, sampler=test_sampler, shuffle=False)
    return Loaders(train, test, train_sampler)
