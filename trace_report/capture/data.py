"""Datasets and loaders: the built-in synthetic CIFAR-shaped set (default, no download), CIFAR-10
in its python-pickle layout, and ImageFolder trees (an ImageNet subset)."""

from __future__ import annotations

import math
import pickle
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
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


CIFAR_LAYOUTS: dict[str, tuple[str, list[str], list[str], bytes]] = {
    # dataset: (folder, training files, test files, label key) of the python-pickle release
    "cifar10": (CIFAR_DIR, [f"data_batch_{i}" for i in range(1, 6)], ["test_batch"], b"labels"),
    "cifar100": ("cifar-100-python", ["train"], ["test"], b"fine_labels"),
}
DATASET_CLASSES = {"synthetic": 10, "cifar10": 10, "cifar100": 100}


class CIFARPickle(Dataset):
    """CIFAR-10 (``cifar-10-batches-py``) or CIFAR-100 (``cifar-100-python``, fine labels) in
    the python-pickle layout."""

    def __init__(self, root: Path, *, train: bool, transform, dataset: str = "cifar10") -> None:
        folder = find_cifar_dir(root, dataset)
        _, train_files, test_files, label_key = CIFAR_LAYOUTS[dataset]
        arrays, labels = [], []
        for name in train_files if train else test_files:
            with open(folder / name, "rb") as fh:
                batch = pickle.load(fh, encoding="bytes")
            arrays.append(np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
            labels.extend(int(label) for label in batch[label_key])
        self.data = np.concatenate(arrays).transpose(0, 2, 3, 1)  # N x H x W x C
        self.labels = labels
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from PIL import Image

        return self.transform(Image.fromarray(self.data[index])), self.labels[index]


CIFAR10Pickle = CIFARPickle  # the name before CIFAR-100 joined


def find_cifar_dir(root: Path, dataset: str = "cifar10") -> Path:
    """The release folder (``cifar-10-batches-py`` / ``cifar-100-python``) at or under
    ``root``; InputError when it is missing."""
    folder_name, train_files, test_files, _ = CIFAR_LAYOUTS[dataset]
    for folder in (root / folder_name, root):
        if all((folder / name).is_file() for name in train_files + test_files):
            return folder
    label = "CIFAR-10" if dataset == "cifar10" else "CIFAR-100"
    expected = "data_batch_1..5 and test_batch" if dataset == "cifar10" else "train and test"
    raise InputError(
        f"{label} not found in {root} (expected {folder_name}/{expected}); "
        "pass --download to fetch it"
    )


def is_synthetic(cfg: CaptureConfig) -> bool:
    """Whether ``cfg`` trains on generated data (``synthetic``, or ``cifar100`` without a
    ``--data-dir``: 100 synthetic classes)."""
    return cfg.dataset == "synthetic" or (cfg.dataset == "cifar100" and cfg.data_dir is None)


def _train_folder(cfg: CaptureConfig) -> Path:
    root = Path(cfg.data_dir)  # validate() guarantees data_dir for real datasets
    if not root.is_dir():
        raise InputError(f"--data-dir {root} is not a directory")
    return root


def folder_classes(root: Path) -> dict[str, list[str]]:
    """Class names of each split of an ImageFolder tree (``train`` and ``val``/``test``), as
    torchvision's ``find_classes`` sorts them; InputError for a missing or empty split."""
    from torchvision.datasets.folder import find_classes

    out = {}
    for names in (("train",), ("val", "test")):
        folder = next((root / n for n in names if (root / n).is_dir()), None)
        if folder is None:
            raise InputError(f"{root} has no {' or '.join(names)}/ folder of class sub-folders")
        try:
            out[folder.name] = find_classes(str(folder))[0]
        except FileNotFoundError as err:
            raise InputError(f"{folder}: {str(err).splitlines()[0]}") from None
    return out


def dataset_classes(cfg: CaptureConfig) -> int:
    """Classes the dataset of ``cfg`` has: 10 (synthetic, CIFAR-10), 100 (CIFAR-100), or the
    class folders of an ImageFolder tree (train and val/test must name the same classes)."""
    if cfg.dataset != "imagefolder":
        return DATASET_CLASSES[cfg.dataset]
    splits = folder_classes(_train_folder(cfg))
    (train_name, train), (test_name, test) = splits.items()
    if train != test:
        missing = sorted(set(train) ^ set(test))[:5]
        raise InputError(
            f"{cfg.data_dir}: {train_name}/ has {len(train)} classes and {test_name}/ "
            f"{len(test)}; they must name the same class folders (differ in: "
            f"{', '.join(missing)})"
        )
    return len(train)


def resolve_classes(cfg: CaptureConfig) -> CaptureConfig:
    """``cfg`` with ``num_classes`` taken from the dataset when it was not given; InputError
    when an explicit ``--num-classes`` disagrees with a real dataset's class count (a synthetic
    set is generated with any number of classes)."""
    found = dataset_classes(cfg)
    if cfg.num_classes is None:
        return replace(cfg, num_classes=found)
    if not is_synthetic(cfg) and cfg.num_classes != found:
        where = cfg.data_dir if cfg.dataset == "imagefolder" else cfg.dataset
        raise InputError(
            f"--num-classes {cfg.num_classes} disagrees with {where}: it has {found} classes "
            "(drop --num-classes to use them)"
        )
    return cfg


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


def _download_cifar(root: Path, dataset: str) -> None:
    from torchvision.datasets import CIFAR10, CIFAR100

    release = CIFAR10 if dataset == "cifar10" else CIFAR100
    root.mkdir(parents=True, exist_ok=True)
    release(str(root), train=True, download=True)
    release(str(root), train=False, download=True)


def synthetic_datasets(cfg: CaptureConfig, *, world_size: int = 1) -> tuple[Dataset, Dataset]:
    """(train, test) synthetic sets for ``cfg`` (10 or, for cifar100, 100 classes); the
    training set grows to at least ``--steps`` full batches per process."""
    n_min = cfg.batch_size * cfg.steps * world_size
    classes = cfg.num_classes or DATASET_CLASSES[cfg.dataset]
    common = {"num_classes": classes, "image_size": image_size_for(cfg), "seed": cfg.seed}
    return (
        SyntheticCIFAR(max(cfg.synthetic_train, n_min), split="train", **common),
        SyntheticCIFAR(cfg.synthetic_test, split="test", **common),
    )


def build_datasets(cfg: CaptureConfig, *, world_size: int = 1) -> tuple[Dataset, Dataset]:
    """(train, test) datasets for ``cfg.dataset``; downloads only when ``cfg.download``."""
    size = image_size_for(cfg)
    if cfg.download and (cfg.dataset not in CIFAR_LAYOUTS or cfg.data_dir is None):
        raise InputError("--download applies only to --dataset cifar10 or cifar100 with "
                         "--data-dir")
    if is_synthetic(cfg):
        return synthetic_datasets(cfg, world_size=world_size)
    root = Path(cfg.data_dir)  # validate() guarantees data_dir for real datasets
    if cfg.dataset in CIFAR_LAYOUTS:
        if cfg.download:
            _download_cifar(root, cfg.dataset)
        return tuple(  # type: ignore[return-value]
            CIFARPickle(root, train=train, dataset=cfg.dataset,
                        transform=_cifar_transforms(size, train=train))
            for train in (True, False)
        )
    root = _train_folder(cfg)
    return _image_folder(root, size, train=True), _image_folder(root, size, train=False)


class DeviceLoader:
    """Batches of a synthetic set held on the device (``--data-on-device``): the uint8 images
    and the labels are copied to the device once; shuffling, slicing and normalisation run
    there, so the training loop makes no host-to-device copies. Under DDP each rank takes
    every ``world_size``-th sample of the (per-epoch) permutation."""

    def __init__(
        self, dataset: SyntheticCIFAR, device: torch.device, batch_size: int, *, shuffle: bool,
        drop_last: bool, seed: int = 0, rank: int = 0, world_size: int = 1,
    ) -> None:
        self.images = dataset.images.to(device)
        self.labels = dataset.labels.to(device)
        self.mean = dataset.mean.to(device)
        self.std = dataset.std.to(device)
        self.device, self.batch_size = device, batch_size
        self.shuffle, self.drop_last, self.seed = shuffle, drop_last, seed
        self.rank, self.world_size = rank, world_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle for ``epoch`` (as ``DistributedSampler.set_epoch``)."""
        self.epoch = epoch

    def _samples(self) -> int:
        return len(range(self.rank, len(self.labels), self.world_size))

    def __len__(self) -> int:
        n, bs = self._samples(), self.batch_size
        return n // bs if self.drop_last else math.ceil(n / bs)

    def _order(self) -> torch.Tensor:
        n = len(self.labels)
        if not self.shuffle:
            return torch.arange(n, device=self.device)[self.rank::self.world_size]
        generator = torch.Generator(device=self.device).manual_seed(self.seed + self.epoch)
        order = torch.randperm(n, generator=generator, device=self.device)
        return order[self.rank::self.world_size]

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        order = self._order()
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            index = order[start:start + self.batch_size]
            images = self.images[index].float().div_(255)
            yield (images - self.mean) / self.std, self.labels[index]


@dataclass
class Loaders:
    """Training and test loaders, and what reshuffles the training set per epoch
    (``set_epoch``: the DDP sampler, or the device-resident loader)."""

    train: DataLoader | DeviceLoader
    test: DataLoader | DeviceLoader
    train_sampler: Sampler | DeviceLoader | None


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
    if cfg.data_on_device:
        return device_loaders(cfg, device, rank=rank, world_size=world_size)
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


def device_loaders(
    cfg: CaptureConfig, device: torch.device, *, rank: int = 0, world_size: int = 1
) -> Loaders:
    """``--data-on-device``: both synthetic splits resident on ``device``."""
    train_set, test_set = synthetic_datasets(cfg, world_size=world_size)
    common = {"seed": cfg.seed, "rank": rank, "world_size": world_size}
    train = DeviceLoader(train_set, device, cfg.batch_size, shuffle=True, drop_last=True, **common)
    test = DeviceLoader(test_set, device, cfg.batch_size, shuffle=False, drop_last=False, **common)
    return Loaders(train, test, train)
