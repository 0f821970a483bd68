"""Models, optimizers and the parameter facts behind `trace-report capture params`."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trace_report.capture.config import OPTIMIZERS, CaptureConfig
from trace_report.capture.models import (
    build_model,
    build_optimizer,
    count_convs,
    count_trainable,
    forward_flop,
    last_linear_in_features,
    optimizer_state_tensors,
    resnet18,
)
from trace_report.capture.params import model_facts
from trace_report.capture.runtime import thread_count
from trace_report.errors import InputError

# BatchNorm channels of the CIFAR ResNet-18: stem 64; per stage 4 BNs in the two blocks, plus
# one in the 1x1 shortcut of stages 2-4. Each BN holds a weight and a bias per channel.
BN_CHANNELS = 64 + 4 * 64 + (4 * 128 + 128) + (4 * 256 + 256) + (4 * 512 + 512)


def test_resnet18_matches_the_published_cifar_figures():
    model = resnet18(10)
    assert count_trainable(model) == 11_173_962
    assert count_convs(model) == 20
    assert last_linear_in_features(model) == 512
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_resnet18_has_a_cifar_stem_and_no_max_pool():
    model = resnet18(10)
    assert model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1)
    assert not any(isinstance(m, nn.MaxPool2d) for m in model.modules())


def test_no_bn_variant_replaces_every_batchnorm_by_identity():
    model = build_model("resnet18-nobn")
    assert not any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    assert count_trainable(model) == 11_173_962 - 2 * BN_CHANNELS
    assert count_convs(model) == 20


@pytest.mark.parametrize(
    ("name", "params", "image"), [("resnet50", 23_528_522, 32), ("alexnet", 57_044_810, 64)]
)
def test_torchvision_models_for_ten_classes(name, params, image):
    model = build_model(name, 10)
    assert count_trainable(model) == params
    with torch.no_grad():
        assert model.eval()(torch.randn(1, 3, image, image)).shape == (1, 10)


def test_unknown_model_and_optimizer_are_input_errors():
    with pytest.raises(InputError):
        build_model("vgg16")
    with pytest.raises(InputError):
        build_optimizer("lion", resnet18().parameters(), lr=0.1, momentum=0.9, weight_decay=0)


def test_params_facts_for_resnet18():
    with thread_count(1):  # one thread: robust on a busy machine
        facts = model_facts("resnet18", CaptureConfig())
    assert facts["trainable_params"] == 11_173_962
    assert facts["params_with_grad"] == 11_173_962  # every parameter takes part in the loss
    assert facts["conv_layers"] == 20
    assert facts["last_linear_in_features"] == 512
    tensors = facts["param_tensors"]
    assert tensors == 62  # 20 conv weights + 20 BN x (weight, bias) + linear weight and bias
    # per parameter: SGD a momentum buffer; Adagrad sum + step; Adadelta square_avg,
    # acc_delta + step; Adam exp_avg, exp_avg_sq + step
    expected = {"sgd": 1, "sgd-nesterov": 1, "adagrad": 2, "adadelta": 3, "adam": 3}
    for name in OPTIMIZERS:
        assert facts[f"optimizer_state_tensors_{name}"] == expected[name] * tensors, name


def test_optimizer_state_counts_only_tensors():
    model = nn.Linear(4, 2)
    optimizer = build_optimizer("adam", model.parameters(), lr=0.1, momentum=0.9, weight_decay=0)
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    assert optimizer_state_tensors(optimizer) == 3 * 2


# ---------------------------------------------------------------- ResNet-18 (ImageNet) and FLOP

def test_resnet18_imagenet_is_torchvision_resnet18():
    import torchvision

    ours = build_model("resnet18-imagenet", 1000)
    reference = torchvision.models.resnet18()
    assert count_trainable(ours) == count_trainable(reference) == 11_689_512  # published figure
    assert isinstance(ours.maxpool, nn.MaxPool2d) and ours.conv1.kernel_size == (7, 7)
    assert count_convs(ours) == 20
    with torch.no_grad():
        assert ours.eval()(torch.randn(1, 3, 64, 64)).shape == (1, 1000)


def test_resnet18_imagenet_nobn_drops_exactly_the_batchnorm_parameters():
    import torchvision

    reference = torchvision.models.resnet18(num_classes=10)
    bn = sum(p.numel() for m in reference.modules() if isinstance(m, nn.BatchNorm2d)
             for p in m.parameters())
    model = build_model("resnet18-imagenet-nobn", 10)
    assert not any(isinstance(m, nn.BatchNorm2d) for m in model.modules())
    assert count_trainable(model) == count_trainable(reference) - bn


def hook_flop(model: nn.Module, images: torch.Tensor) -> int:
    """FLOP of conv and linear layers by arithmetic on the shapes seen in a real forward pass:
    2 x output elements x (input channels / groups) x kernel area; 2 x batch x in x out."""
    total = 0

    def conv(m: nn.Conv2d, _inp, out) -> None:
        nonlocal total
        kh, kw = m.kernel_size
        total += 2 * out.numel() * (m.in_channels // m.groups) * kh * kw

    def linear(m: nn.Linear, inp, _out) -> None:
        nonlocal total
        total += 2 * inp[0].shape[0] * m.in_features * m.out_features

    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            m.register_forward_hook(conv)
        elif isinstance(m, nn.Linear):
            m.register_forward_hook(linear)
    with torch.no_grad():
        model.eval()(images)
    return total


@pytest.mark.parametrize(("name", "size"), [("alexnet", 64), ("resnet18-imagenet", 32),
                                            ("resnet18", 16), ("resnet50", 32)])
def test_forward_flop_matches_layer_arithmetic_on_a_real_pass(name, size):
    with thread_count(1):
        expected = hook_flop(build_model(name, 10), torch.randn(2, 3, size, size))
    assert forward_flop(name, num_classes=10, image_size=size, batch_size=2) == expected


def test_forward_flop_matches_flop_counter_on_real_tensors():
    from torch.utils.flop_counter import FlopCounterMode

    model = build_model("resnet18-imagenet", 10).eval()
    counter = FlopCounterMode(display=False)
    with thread_count(1), counter, torch.no_grad():
        model(torch.randn(1, 3, 32, 32))
    assert forward_flop("resnet18-imagenet", num_classes=10, image_size=32) == \
        counter.get_total_flops()


@pytest.mark.parametrize(("name", "flop"), [("alexnet", 1_428_376_960),
                                            ("resnet18-imagenet", 3_628_146_688)])
def test_forward_flop_per_224_image_matches_the_reference(name, flop):
    # torchvision AlexNet / ResNet-18, 1000 classes, one 224x224 image, forward only
    per_batch = forward_flop(name, num_classes=1000, image_size=224, batch_size=8)
    assert per_batch == 8 * forward_flop(name, num_classes=1000, image_size=224) == 8 * flop


def test_params_reports_forward_flop_of_one_batch_per_image():
    cfg = CaptureConfig(image_size=40, num_classes=7, batch_size=3)
    with thread_count(1):
        facts = model_facts("resnet18-imagenet", cfg)
        expected = hook_flop(build_model("resnet18-imagenet", 7), torch.randn(3, 3, 40, 40))
    assert facts["forward_flop_per_image"] * 3 == expected
    assert facts["image_size"] == 40 and facts["num_classes"] == 7
    assert facts["trainable_params"] == 11_689_512 - 993 * 513  # 1000 -> 7 classes: fc shrinks


def test_conv_bias_and_single_tensor_optimizer_options():
    """--conv-bias gives every Conv2d a bias (BatchNorm2d still follows); --no-optimizer-foreach
    builds the optimizer with foreach=False (its single-tensor loop)."""
    import torch
    from torch import nn

    from trace_report.capture.models import build_model, build_optimizer, with_conv_bias

    model = with_conv_bias(build_model("resnet18"))
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 20 and all(c.bias is not None and not c.bias.any() for c in convs)
    opt = build_optimizer("sgd", model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.0, foreach=False)
    assert opt.defaults["foreach"] is False
    assert build_optimizer("adam", model.parameters(), lr=0.1, momentum=0.0, weight_decay=0.0) \
        .defaults["foreach"] is None
    assert isinstance(opt, torch.optim.SGD)
