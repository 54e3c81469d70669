"""posgeo: the geometry of positional encodings in transformers.

The companion package of the book. Every public name lives in a private module and is
re-exported here, flat::

    >>> import posgeo
    >>> posgeo.hellinger_matrix([[1.0, 0.0], [0.0, 1.0]]).round(3).tolist()
    [[0.0, 1.0], [1.0, 0.0]]

Importing the package has no side effects: no downloads, no files written, no global
state changed.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _version

from . import _analysis, _cache, _corpus, _encodings, _geometry, _marginals, _synthetic, _plotting
from . import _pretrained, _model, _train, _monotonicity, _adjacency, _tasks
from . import _profiles, _equivariance, _separation
from . import _circulant, _lowrank, _ntk, _layers, _nope
from . import _audit
from ._analysis import *  # noqa: F401,F403
from ._cache import *  # noqa: F401,F403
from ._corpus import *  # noqa: F401,F403
from ._encodings import *  # noqa: F401,F403
from ._geometry import *  # noqa: F401,F403
from ._marginals import *  # noqa: F401,F403
from ._synthetic import *  # noqa: F401,F403
from ._plotting import *  # noqa: F401,F403
from ._pretrained import *  # noqa: F401,F403
from ._model import *  # noqa: F401,F403
from ._train import *  # noqa: F401,F403
from ._monotonicity import *  # noqa: F401,F403
from ._adjacency import *  # noqa: F401,F403
from ._tasks import *  # noqa: F401,F403
from ._profiles import *  # noqa: F401,F403
from ._equivariance import *  # noqa: F401,F403
from ._separation import *  # noqa: F401,F403
from ._circulant import *  # noqa: F401,F403
from ._lowrank import *  # noqa: F401,F403
from ._ntk import *  # noqa: F401,F403
from ._layers import *  # noqa: F401,F403
from ._nope import *  # noqa: F401,F403
from ._audit import *  # noqa: F401,F403

try:
    __version__ = _version("posgeo")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = sorted(
    set(_analysis.__all__)
    | set(_cache.__all__)
    | set(_corpus.__all__)
    | set(_encodings.__all__)
    | set(_geometry.__all__)
    | set(_marginals.__all__)
    | set(_synthetic.__all__)
    | set(_plotting.__all__)
    | set(_pretrained.__all__)
    | set(_model.__all__)
    | set(_train.__all__)
    | set(_monotonicity.__all__)
    | set(_adjacency.__all__)
    | set(_tasks.__all__)
    | set(_profiles.__all__)
    | set(_equivariance.__all__)
    | set(_separation.__all__)
    | set(_circulant.__all__)
    | set(_lowrank.__all__)
    | set(_ntk.__all__)
    | set(_layers.__all__)
    | set(_nope.__all__)
    | set(_audit.__all__)
) + ["__version__"]
