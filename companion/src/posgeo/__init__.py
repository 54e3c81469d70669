"""posgeo: the geometry of positional encodings in transformers.

The companion package of the book, in three parts:

- **the library** (this namespace, flat): corpora and token sequences, positional marginals and
  the estimators of a corpus's positional geometry, Hellinger geometry, MDS and stress,
  positional encodings, a small transformer and its one training loop, metrics of position
  tables (separation, monotonicity, adjacency), access to pretrained Hugging Face models,
  figures, a cache and progress bars;
- :mod:`posgeo.experiments` — each chapter's recipes (settings, runs, tables, plots), built
  only from the library's public names;
- :mod:`posgeo.audit` — the ``posgeo audit`` tool.

::

    >>> import posgeo
    >>> posgeo.hellinger_matrix([[1.0, 0.0], [0.0, 1.0]]).round(3).tolist()
    [[0.0, 1.0], [1.0, 0.0]]

Importing the package has no side effects: no downloads, no files written, no global
state changed; :mod:`posgeo.experiments` and :mod:`posgeo.audit` are imported only when asked for.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _version

from . import _cache, _corpus, _encodings, _geometry, _layers, _linalg, _marginals, _metrics
from . import _model, _plotting, _pretrained, _profiles, _progress, _sequences, _synthetic, _train
from ._cache import *  # noqa: F401,F403
from ._corpus import *  # noqa: F401,F403
from ._encodings import *  # noqa: F401,F403
from ._geometry import *  # noqa: F401,F403
from ._layers import *  # noqa: F401,F403
from ._linalg import *  # noqa: F401,F403
from ._marginals import *  # noqa: F401,F403
from ._metrics import *  # noqa: F401,F403
from ._model import *  # noqa: F401,F403
from ._plotting import *  # noqa: F401,F403
from ._pretrained import *  # noqa: F401,F403
from ._profiles import *  # noqa: F401,F403
from ._progress import *  # noqa: F401,F403
from ._sequences import *  # noqa: F401,F403
from ._synthetic import *  # noqa: F401,F403
from ._train import *  # noqa: F401,F403

try:
    __version__ = _version("posgeo")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

#: The library's modules, in the order of the API reference (data, geometry, encodings,
#: model and training, metrics, pretrained models, infrastructure).
LIBRARY_MODULES = (
    _sequences, _corpus, _synthetic, _marginals,
    _geometry, _linalg,
    _encodings,
    _model, _train,
    _metrics, _layers,
    _pretrained,
    _plotting, _cache, _progress, _profiles,
)

__all__ = sorted({name for module in LIBRARY_MODULES for name in module.__all__}) + ["__version__"]
