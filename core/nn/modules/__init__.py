"""Every layer class; ``webgrad.nn`` re-exports them all."""
from .module import Module, RemovableHandle  # noqa: F401
from .activation import (  # noqa: F401
    ELU, GELU, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish, ReLU, ReLU6, Sigmoid, SiLU, Softmax,
    Softplus, Tanh,
)
from .attention import MultiheadAttention  # noqa: F401
from .container import ModuleDict, ModuleList, Sequential  # noqa: F401
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d  # noqa: F401
from .dropout import Dropout, Dropout1d, Dropout2d  # noqa: F401
from .linear import Flatten, Identity, Linear, NonDynamicallyQuantizableLinear, Unflatten  # noqa: F401
from .loss import (  # noqa: F401
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss,
)
from .norm import BatchNorm1d, BatchNorm2d, LayerNorm  # noqa: F401
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase  # noqa: F401
from .pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool2d  # noqa: F401
from .pooling import (  # noqa: F401
    AdaptiveAvgPool1d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d,
    AvgPool3d, LPPool1d, LPPool2d, LPPool3d, MaxPool1d, MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d,
)
from .sparse import Embedding  # noqa: F401
from .upsampling import (  # noqa: F401
    ChannelShuffle, Fold, PixelShuffle, PixelUnshuffle, Unfold, Upsample, UpsamplingBilinear2d, UpsamplingNearest2d,
)
from .activation import (  # noqa: F401
    CELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish, PReLU, RReLU, Softmax2d, Softmin, Softshrink, Softsign,
    Tanhshrink, Threshold,
)
from .distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from .sparse import EmbeddingBag  # noqa: F401
from .linear import Bilinear, LazyLinear  # noqa: F401
from .dropout import AlphaDropout, Dropout3d, FeatureAlphaDropout  # noqa: F401
from .loss import (  # noqa: F401
    CosineEmbeddingLoss, CTCLoss, GaussianNLLLoss, HingeEmbeddingLoss, KLDivLoss, MarginRankingLoss,
    MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, PoissonNLLLoss, SoftMarginLoss,
    TripletMarginLoss, TripletMarginWithDistanceLoss,
)
from .norm import (  # noqa: F401
    BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d, LocalResponseNorm, RMSNorm,
)
from .transformer import (  # noqa: F401
    Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer,
)
