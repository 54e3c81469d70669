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
state changed. It is also cheap: each name's module (and torch, transformers, scipy) is
imported on first use, so ``posgeo --help`` answers at once; :mod:`posgeo.experiments` and
:mod:`posgeo.audit` are imported only when asked for.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version as _version
from types import ModuleType
from typing import Any

try:
    __version__ = _version("posgeo")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

# The library's public names, module by module, in the order of the API reference (data,
# geometry, encodings, model and training, metrics, pretrained models, infrastructure).
# Each module's ``__all__`` is the source of truth; tests/test_package.py checks this table
# against it, so a name added there and not here (or the reverse) fails the tests.
_EXPORTS_BY_MODULE: dict[str, tuple[str, ...]] = {
    '_sequences': (
        'Sequences',
        'Corpus',
        'overlap_groups',
    ),
    '_corpus': (
        'NESTED_SPLITS',
        'CorpusUnavailableError',
        'load_texts',
        'hub_unreachable_reason',
        'corpus_source',
        'default_tokenizer',
        'tokenize',
        'subset_indices',
        'load_corpus',
    ),
    '_synthetic': (
        'MarginalSampler',
        'synthetic_marginals',
        'sample_synthetic_sequences',
        'synthetic_corpus',
    ),
    '_marginals': (
        'CorpusGeometry',
        'corpus_geometry',
        'noise_share',
        'matched_hellinger_matrix',
        'NoiseFloor',
        'hellinger_noise_floor',
        'positional_marginals',
        'hybrid_hellinger_matrix',
    ),
    '_counts': (
        'PositionalCounts',
    ),
    '_count_run': (
        'positional_counts',
    ),
    '_sources': (
        'HubDataset',
    ),
    '_tokenizers': (
        'tokenizer_id',
    ),
    '_bootstrap': (
        'BootstrapGeometry',
        'bootstrap_geometry',
        'stress_intervals',
        'stress_differences',
    ),
    '_seeds': (
        'SeedInterval',
        'seed_interval',
        'seed_difference',
        'seed_summary',
        'interval_table',
    ),
    '_geometry': (
        'distance_by_offset',
        'stress_table',
        'check_distance_matrix',
        'hellinger_matrix',
        'pairwise_distances',
        'stress',
        'MDSResult',
        'double_centered_gram',
        'classical_mds',
        'stress_optimal_mds',
        'SpectrumSummary',
        'effective_rank',
        'order_free_baselines',
    ),
    '_linalg': (
        'small_blas',
        'top_eigenpairs',
    ),
    '_encodings': (
        'sinusoidal_encoding',
        'rope_encoding',
        'alibi_encoding',
        'random_encoding',
    ),
    '_model': (
        'TransformerConfig',
        'TransformerOutput',
        'Transformer',
        'count_parameters',
        'eval_mode',
    ),
    '_train': (
        'IGNORE_INDEX',
        'torch_threads',
        'Batch',
        'FirstMarkerTask',
        'MLMTask',
        'resolve_device',
        'TrainConfig',
        'TrainResult',
        'evaluate',
        'train',
        'optimize',
    ),
    '_metrics': (
        'cosine_similarity_matrix',
        'adjacency_score',
        'monotonicity_violation_rate',
        'SeparationStats',
        'separation_stats',
    ),
    '_layers': (
        'projected_stress',
        'layer_stress_table',
    ),
    '_pretrained': (
        'encoder_parts',
        'query_key_maps',
        'num_attention_heads',
        'positional_input',
        'positional_hidden_states',
        'MINILM',
        'POSITIONAL_KINDS',
        'default_model_path',
        'resolve_pretrained',
        'load_pretrained',
        'model_positional_kind',
        'find_position_embedding',
        'learned_position_table',
    ),
    '_plotting': (
        'COLUMN_WIDTH',
        'PANEL_WIDTH',
        'PANEL_HEIGHT',
        'series_colour',
        'colour_scale',
        'finish_chart',
        'panel_grid',
        'series_chart',
        'heatmap_chart',
        'chart_spec',
        'notebook_setup',
        'display_table',
        'plot_spectra',
    ),
    '_cache': (
        'cached',
        'array_digest',
        'file_digest',
    ),
    '_progress': (
        'progress_bar',
    ),
    '_profiles': (
        'current_profile',
    ),
}

_EXPORTS = {name: module for module, names in _EXPORTS_BY_MODULE.items() for name in names}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562)."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    if name == "LIBRARY_MODULES":
        modules: tuple[ModuleType, ...] = tuple(importlib.import_module(f".{m}", __name__) for m in _EXPORTS_BY_MODULE)
        globals()[name] = modules
        return modules
    raise AttributeError(f"module 'posgeo' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | {"LIBRARY_MODULES"})
