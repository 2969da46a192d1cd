"""``webgrad.nn``: layers, losses, initialisation and the ``Module`` base class, like ``torch.nn``.

Example:
    >>> from webgrad import nn
    >>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    >>> model(webgrad.randn(3, 4)).shape
    webgrad.Size([3, 2])
"""
from .parameter import Parameter  # noqa: F401
from .modules import (  # noqa: F401
    ELU, GELU, AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, BCELoss, BCEWithLogitsLoss, Conv1d,
    Conv2d, CrossEntropyLoss, Dropout, Embedding, Flatten, Hardtanh, HuberLoss, Identity, L1Loss, LayerNorm,
    LeakyReLU, Linear, LogSigmoid, LogSoftmax, MaxPool2d, Mish, Module, ModuleDict, ModuleList, MSELoss,
    MultiheadAttention, NLLLoss, NonDynamicallyQuantizableLinear, ReLU, ReLU6, RemovableHandle, Sequential,
    Sigmoid, SiLU, SmoothL1Loss, Softmax, Softplus, Tanh, TransformerEncoder, TransformerEncoderLayer,
    Unflatten,
)
from .modules import Dropout1d, Dropout2d  # noqa: F401
from .modules import Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: F401
from .modules import (  # noqa: F401
    AdaptiveAvgPool1d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d,
    AvgPool3d, LPPool1d, LPPool2d, LPPool3d, MaxPool1d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d,
)
from .modules import (  # noqa: F401
    ChannelShuffle, Fold, PixelShuffle, PixelUnshuffle, Unfold, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d,
)
from .modules import Transformer, TransformerDecoder, TransformerDecoderLayer  # noqa: F401
from .modules import (  # noqa: F401
    CELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish, PReLU, RReLU, Softmax2d, Softmin, Softshrink, Softsign,
    Tanhshrink, Threshold, CosineSimilarity, PairwiseDistance, AlphaDropout, Dropout3d, FeatureAlphaDropout,
    CosineEmbeddingLoss, CTCLoss, GaussianNLLLoss, HingeEmbeddingLoss, KLDivLoss, MarginRankingLoss,
    MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, PoissonNLLLoss, SoftMarginLoss,
    TripletMarginLoss, TripletMarginWithDistanceLoss, BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d,
    InstanceNorm3d, LocalResponseNorm, RMSNorm, EmbeddingBag, LazyLinear, Bilinear,
)
from .modules import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase  # noqa: F401
from . import functional, init, parallel, utils  # noqa: F401,E402
from .parallel import DataParallel  # noqa: F401,E402
