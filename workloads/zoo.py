"""The papers' larger models, written in torch.nn layer for layer as torchvision defines them (torchvision itself
does not load on these machines): ResNet-50, GoogLeNet and Inception-v3. Each is an nn.Sequential whose children
run in order (a Flatten stands where torchvision calls torch.flatten), so parameter order and names match
torchvision's and layer-by-layer strategies (iBatch) can walk them. Auxiliary classifiers are left out: they only
train when their loss is used, and DDP needs every parameter to get a gradient."""

from __future__ import annotations

from collections import OrderedDict
from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def _init_resnet(model: nn.Module) -> None:
    """torchvision's ResNet initialization: He normal (fan out) for convolutions, BN at (1, 0)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.constant_(m.weight, 1)
            nn.init.constant_(m.bias, 0)


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: 1x1 reduce, 3x3 (carrying the stride), 1x1 expand by 4, plus the shortcut."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: Optional[nn.Module] = None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


def _resnet_stage(inplanes: int, planes: int, blocks: int, stride: int) -> nn.Sequential:
    downsample = None
    if stride != 1 or inplanes != planes * Bottleneck.expansion:
        downsample = nn.Sequential(nn.Conv2d(inplanes, planes * Bottleneck.expansion, 1, stride=stride, bias=False),
                                   nn.BatchNorm2d(planes * Bottleneck.expansion))
    layers = [Bottleneck(inplanes, planes, stride, downsample)]
    layers += [Bottleneck(planes * Bottleneck.expansion, planes) for _ in range(1, blocks)]
    return nn.Sequential(*layers)


def resnet50(num_classes: int = 1000) -> nn.Sequential:
    """ResNet-50 (25,557,032 parameters with 1000 classes), for 3x224x224 inputs."""
    stages, inplanes = [], 64
    for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        stages.append(_resnet_stage(inplanes, planes, blocks, stride))
        inplanes = planes * Bottleneck.expansion
    model = nn.Sequential(OrderedDict([
        ("conv1", nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)), ("bn1", nn.BatchNorm2d(64)),
        ("relu", nn.ReLU(inplace=True)), ("maxpool", nn.MaxPool2d(3, stride=2, padding=1)),
        ("layer1", stages[0]), ("layer2", stages[1]), ("layer3", stages[2]), ("layer4", stages[3]),
        ("avgpool", nn.AdaptiveAvgPool2d((1, 1))), ("flatten", nn.Flatten()), ("fc", nn.Linear(2048, num_classes))]))
    _init_resnet(model)
    return model


class BasicConv2d(nn.Module):
    """Convolution without bias, batch norm (eps 0.001), ReLU: the unit of GoogLeNet and Inception."""

    def __init__(self, in_channels: int, out_channels: int, **kwargs):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, bias=False, **kwargs)
        self.bn = nn.BatchNorm2d(out_channels, eps=0.001)

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


class GoogLeNetInception(nn.Module):
    """GoogLeNet's inception block (torchvision keeps a 3x3 where the paper has 5x5: vision issue 906)."""

    def __init__(self, cin: int, ch1x1: int, ch3x3red: int, ch3x3: int, ch5x5red: int, ch5x5: int, pool_proj: int):
        super().__init__()
        self.branch1 = BasicConv2d(cin, ch1x1, kernel_size=1)
        self.branch2 = nn.Sequential(BasicConv2d(cin, ch3x3red, kernel_size=1),
                                     BasicConv2d(ch3x3red, ch3x3, kernel_size=3, padding=1))
        self.branch3 = nn.Sequential(BasicConv2d(cin, ch5x5red, kernel_size=1),
                                     BasicConv2d(ch5x5red, ch5x5, kernel_size=3, padding=1))
        self.branch4 = nn.Sequential(nn.MaxPool2d(kernel_size=3, stride=1, padding=1, ceil_mode=True),
                                     BasicConv2d(cin, pool_proj, kernel_size=1))

    def forward(self, x: Tensor) -> Tensor:
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


def _init_truncated(model: nn.Module, std: float, bound: float) -> None:
    """Normal weights truncated to [-bound, bound] for convolutions and linear layers, BN at (1, 0) (GoogLeNet:
    std 0.01 within two std; Inception-v3: std 0.1 within +-2)."""
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.trunc_normal_(m.weight, mean=0.0, std=std, a=-bound, b=bound)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.constant_(m.weight, 1)
            nn.init.constant_(m.bias, 0)


def googlenet(num_classes: int = 1000) -> nn.Sequential:
    """GoogLeNet (Inception v1) without its auxiliary heads (6,624,904 parameters), for 3x224x224 inputs."""
    pool = lambda k: nn.MaxPool2d(k, stride=2, ceil_mode=True)  # noqa: E731
    model = nn.Sequential(OrderedDict([
        ("conv1", BasicConv2d(3, 64, kernel_size=7, stride=2, padding=3)), ("maxpool1", pool(3)),
        ("conv2", BasicConv2d(64, 64, kernel_size=1)), ("conv3", BasicConv2d(64, 192, kernel_size=3, padding=1)),
        ("maxpool2", pool(3)),
        ("inception3a", GoogLeNetInception(192, 64, 96, 128, 16, 32, 32)),
        ("inception3b", GoogLeNetInception(256, 128, 128, 192, 32, 96, 64)), ("maxpool3", pool(3)),
        ("inception4a", GoogLeNetInception(480, 192, 96, 208, 16, 48, 64)),
        ("inception4b", GoogLeNetInception(512, 160, 112, 224, 24, 64, 64)),
        ("inception4c", GoogLeNetInception(512, 128, 128, 256, 24, 64, 64)),
        ("inception4d", GoogLeNetInception(512, 112, 144, 288, 32, 64, 64)),
        ("inception4e", GoogLeNetInception(528, 256, 160, 320, 32, 128, 128)), ("maxpool4", pool(2)),
        ("inception5a", GoogLeNetInception(832, 256, 160, 320, 32, 128, 128)),
        ("inception5b", GoogLeNetInception(832, 384, 192, 384, 48, 128, 128)),
        ("avgpool", nn.AdaptiveAvgPool2d((1, 1))), ("flatten", nn.Flatten()), ("dropout", nn.Dropout(0.2)),
        ("fc", nn.Linear(1024, num_classes))]))
    _init_truncated(model, std=0.01, bound=0.02)
    return model


class InceptionA(nn.Module):
    """Inception-v3's 35x35 block."""

    def __init__(self, cin: int, pool_features: int):
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, 64, kernel_size=1)
        self.branch5x5_1 = BasicConv2d(cin, 48, kernel_size=1)
        self.branch5x5_2 = BasicConv2d(48, 64, kernel_size=5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, 64, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, kernel_size=3, padding=1)
        self.branch_pool = BasicConv2d(cin, pool_features, kernel_size=1)

    def forward(self, x: Tensor) -> Tensor:
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return torch.cat([self.branch1x1(x), b5, b3, bp], 1)


class InceptionB(nn.Module):
    """Inception-v3's grid reduction 35 -> 17."""

    def __init__(self, cin: int):
        super().__init__()
        self.branch3x3 = BasicConv2d(cin, 384, kernel_size=3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, 64, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, kernel_size=3, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        return torch.cat([self.branch3x3(x), b3, F.max_pool2d(x, kernel_size=3, stride=2)], 1)


class InceptionC(nn.Module):
    """Inception-v3's 17x17 block with factorized 7x7 convolutions."""

    def __init__(self, cin: int, channels_7x7: int):
        super().__init__()
        c7 = channels_7x7
        self.branch1x1 = BasicConv2d(cin, 192, kernel_size=1)
        self.branch7x7_1 = BasicConv2d(cin, c7, kernel_size=1)
        self.branch7x7_2 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(cin, c7, kernel_size=1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch_pool = BasicConv2d(cin, 192, kernel_size=1)

    def forward(self, x: Tensor) -> Tensor:
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        d = x
        for conv in (self.branch7x7dbl_1, self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4,
                     self.branch7x7dbl_5):
            d = conv(d)
        bp = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return torch.cat([self.branch1x1(x), b7, d, bp], 1)


class InceptionD(nn.Module):
    """Inception-v3's grid reduction 17 -> 8."""

    def __init__(self, cin: int):
        super().__init__()
        self.branch3x3_1 = BasicConv2d(cin, 192, kernel_size=1)
        self.branch3x3_2 = BasicConv2d(192, 320, kernel_size=3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(cin, 192, kernel_size=1)
        self.branch7x7x3_2 = BasicConv2d(192, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(192, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(192, 192, kernel_size=3, stride=2)

    def forward(self, x: Tensor) -> Tensor:
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        return torch.cat([b3, b7, F.max_pool2d(x, kernel_size=3, stride=2)], 1)


class InceptionE(nn.Module):
    """Inception-v3's 8x8 block with expanded filter banks."""

    def __init__(self, cin: int):
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, 320, kernel_size=1)
        self.branch3x3_1 = BasicConv2d(cin, 384, kernel_size=1)
        self.branch3x3_2a = BasicConv2d(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(cin, 448, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(448, 384, kernel_size=3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(cin, 192, kernel_size=1)

    def forward(self, x: Tensor) -> Tensor:
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        d = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        d = torch.cat([self.branch3x3dbl_3a(d), self.branch3x3dbl_3b(d)], 1)
        bp = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return torch.cat([self.branch1x1(x), b3, d, bp], 1)


class InceptionAux(nn.Module):
    """Inception-v3's auxiliary classifier on the 17x17 grid (not part of dmlbed's inception_v3: see above)."""

    def __init__(self, cin: int, num_classes: int):
        super().__init__()
        self.conv0 = BasicConv2d(cin, 128, kernel_size=1)
        self.conv1 = BasicConv2d(128, 768, kernel_size=5)
        self.fc = nn.Linear(768, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.conv1(self.conv0(F.avg_pool2d(x, kernel_size=5, stride=3)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, (1, 1)), 1))


def inception_v3(num_classes: int = 1000) -> nn.Sequential:
    """Inception-v3 without its auxiliary classifier (23,834,568 parameters; torchvision's 27,161,264 include the
    InceptionAux's 3,326,696), for 3x299x299 inputs."""
    model = nn.Sequential(OrderedDict([
        ("Conv2d_1a_3x3", BasicConv2d(3, 32, kernel_size=3, stride=2)),
        ("Conv2d_2a_3x3", BasicConv2d(32, 32, kernel_size=3)),
        ("Conv2d_2b_3x3", BasicConv2d(32, 64, kernel_size=3, padding=1)),
        ("maxpool1", nn.MaxPool2d(kernel_size=3, stride=2)),
        ("Conv2d_3b_1x1", BasicConv2d(64, 80, kernel_size=1)),
        ("Conv2d_4a_3x3", BasicConv2d(80, 192, kernel_size=3)),
        ("maxpool2", nn.MaxPool2d(kernel_size=3, stride=2)),
        ("Mixed_5b", InceptionA(192, 32)), ("Mixed_5c", InceptionA(256, 64)), ("Mixed_5d", InceptionA(288, 64)),
        ("Mixed_6a", InceptionB(288)),
        ("Mixed_6b", InceptionC(768, 128)), ("Mixed_6c", InceptionC(768, 160)), ("Mixed_6d", InceptionC(768, 160)),
        ("Mixed_6e", InceptionC(768, 192)),
        ("Mixed_7a", InceptionD(768)), ("Mixed_7b", InceptionE(1280)), ("Mixed_7c", InceptionE(2048)),
        ("avgpool", nn.AdaptiveAvgPool2d((1, 1))), ("dropout", nn.Dropout(0.5)), ("flatten", nn.Flatten()),
        ("fc", nn.Linear(2048, num_classes))]))
    _init_truncated(model, std=0.1, bound=2.0)
    return model


ZOO = {"resnet50": (resnet50, (3, 224, 224)), "googlenet": (googlenet, (3, 224, 224)),
       "inception_v3": (inception_v3, (3, 299, 299))}


def names() -> List[str]:
    """The models this module builds."""
    return list(ZOO)
