"""Models: the project's CIFAR ResNet-18 (with and without BatchNorm), torchvision ResNet-18
(ImageNet stem), ResNet-50 and AlexNet, the optimizers, the parameter facts that
``capture params`` prints, and forward FLOP counts from ``torch.utils.flop_counter``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from trace_report.errors import InputError

MIN_IMAGE_SIZE: dict[str, int] = {"alexnet": 64}  # AlexNet's pooling needs at least 63x63 pixels


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with BatchNorm and an identity (or 1x1-conv) shortcut."""

    expansion = 1

    def __init__(self, in_planes: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut: nn.Module = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False),
                nn.BatchNorm2d(planes),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    """ResNet for 32x32 inputs: 3x3 stride-1 stem, no max-pool, four stages of BasicBlocks."""

    def __init__(self, blocks: tuple[int, ...] = (2, 2, 2, 2), num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        in_planes = 64
        stages = []
        for planes, count, stride in zip((64, 128, 256, 512), blocks, (1, 2, 2, 2), strict=True):
            layers = []
            for block_stride in [stride] + [1] * (count - 1):
                layers.append(BasicBlock(in_planes, planes, block_stride))
                in_planes = planes
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.linear = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer4(self.layer3(self.layer2(self.layer1(out))))
        out = F.adaptive_avg_pool2d(out, 1).flatten(1)
        return self.linear(out)


def resnet18(num_classes: int = 10) -> ResNet:
    """CIFAR ResNet-18: 11,173,962 parameters for 10 classes, 20 conv layers."""
    return ResNet((2, 2, 2, 2), num_classes)


def without_batchnorm(model: nn.Module) -> nn.Module:
    """Replace every BatchNorm layer of ``model`` by ``nn.Identity`` (in place); return it."""
    for name, child in model.named_children():
        if isinstance(child, nn.modules.batchnorm._BatchNorm):
            setattr(model, name, nn.Identity())
        else:
            without_batchnorm(child)
    return model


def build_model(name: str, num_classes: int = 10) -> nn.Module:
    """Build a model by CLI name: ``resnet18`` (CIFAR stem), ``resnet18-imagenet``
    (torchvision: 7x7 stride-2 stem and max-pool), ``resnet50``, ``alexnet``; a ``-nobn``
    suffix replaces every BatchNorm by Identity."""
    import torchvision

    if name.endswith("-nobn"):
        return without_batchnorm(build_model(name.removesuffix("-nobn"), num_classes))
    if name == "resnet18":
        return resnet18(num_classes)
    if name == "resnet18-imagenet":
        return torchvision.models.resnet18(num_classes=num_classes)
    if name == "resnet50":
        return torchvision.models.resnet50(num_classes=num_classes)
    if name == "alexnet":
        return torchvision.models.alexnet(num_classes=num_classes)
    raise InputError(f"unknown model {name!r}")


def with_conv_bias(model: nn.Module) -> nn.Module:
    """Give every ``nn.Conv2d`` of ``model`` without a bias a zero-initialised one (in place);
    return it. A BatchNorm2d after the convolution cancels that bias: what PyTorch's
    Conv2dBiasFollowedByBatchNorm2dPattern reports."""
    for module in model.modules():
        if isinstance(module, nn.Conv2d) and module.bias is None:
            module.bias = nn.Parameter(torch.zeros(module.out_channels, device=module.weight.device,
                                                   dtype=module.weight.dtype))
    return model


def build_optimizer(
    name: str, params, *, lr: float, momentum: float, weight_decay: float, foreach: bool | None = None
) -> torch.optim.Optimizer:
    """The optimizer ``name`` (sgd, sgd-nesterov, adagrad, adadelta, adam) over ``params``;
    ``foreach`` as torch.optim takes it (False: the single-tensor loop, one set of kernels per
    parameter; None: torch's default)."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay, foreach=foreach)
    if name == "sgd-nesterov":
        return torch.optim.SGD(
            params, lr=lr, momentum=momentum, weight_decay=weight_decay, nesterov=True, foreach=foreach
        )
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr, weight_decay=weight_decay, foreach=foreach)
    if name == "adadelta":
        return torch.optim.Adadelta(params, lr=lr, weight_decay=weight_decay, foreach=foreach)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay, foreach=foreach)
    raise InputError(f"unknown optimizer {name!r}")


def count_trainable(model: nn.Module) -> int:
    """Number of trainable parameter elements."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def count_with_grad(model: nn.Module) -> int:
    """Number of parameter elements whose ``.grad`` is set (call after a backward pass)."""
    return sum(p.numel() for p in model.parameters() if p.grad is not None)


def count_convs(model: nn.Module) -> int:
    """Number of ``nn.Conv2d`` layers."""
    return sum(isinstance(m, nn.Conv2d) for m in model.modules())


def last_linear_in_features(model: nn.Module) -> int:
    """Input width of the model's last ``nn.Linear`` layer."""
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise InputError(f"{type(model).__name__} has no linear layer")
    return linears[-1].in_features


def optimizer_state_tensors(optimizer: torch.optim.Optimizer) -> int:
    """Tensors held in ``optimizer.state`` (momentum buffers, moments, step counters)."""
    return sum(
        isinstance(value, torch.Tensor)
        for state in optimizer.state.values()
        for value in state.values()
    )


def forward_flop(name: str, *, num_classes: int, image_size: int, batch_size: int = 1) -> int:
    """FLOP of one forward pass of model ``name`` over a batch of ``batch_size`` images of
    ``image_size`` pixels, counted by ``torch.utils.flop_counter.FlopCounterMode`` (a
    multiply-add is 2 FLOP; convolutions, matmuls and linear layers; elementwise, pooling and
    BatchNorm are not counted). Built on the meta device: shapes only, no memory, no compute."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.device("meta"):
        model = build_model(name, num_classes).eval()
        images = torch.empty(batch_size, 3, image_size, image_size)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(images)
    return int(counter.get_total_flops())
