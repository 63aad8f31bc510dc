"""convnet7, imshard's small-image network, in PyTorch.

The module layout matches imshard's tensor names, so the weights
`imshard export` writes load with strict=True:

    import safetensors.torch
    from convnet7 import ConvNet7
    m = ConvNet7(num_classes=10, size=32)
    m.load_state_dict(safetensors.torch.load_file("w.safetensors"), strict=True)

Five blocks of 3x3 convolution (no bias) + batch norm + ReLU with 32, 64,
128, 256 and 256 channels; after each of the first four, a 2x2 max pool
while the feature map is at least 2x2 (so the `features.N` numbering
depends on the input size: pass the size the model was trained at, the
checkpoint's `size`); global average pooling; classifier.0 linear
256 -> 256, ReLU, dropout 0.2, classifier.3 linear 256 -> classes.
"""
import torch
from torch import nn


class ConvNet7(nn.Module):
    def __init__(self, num_classes, size):
        super().__init__()
        layers, channels, side = [], 3, size
        for block, width in enumerate((32, 64, 128, 256, 256)):
            layers += [nn.Conv2d(channels, width, 3, padding=1, bias=False),
                       nn.BatchNorm2d(width), nn.ReLU(inplace=True)]
            channels = width
            if block < 4 and side >= 2:
                layers.append(nn.MaxPool2d(2, 2))
                side //= 2
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(256, 256), nn.ReLU(inplace=True), nn.Dropout(0.2),
            nn.Linear(256, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))
