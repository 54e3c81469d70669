r"""``posgeo audit``: how well do a model's positions fit a corpus's positional geometry?

:func:`audit` answers, for a corpus and a pretrained model that a user brings, the question
the book teaches, with the measurements of its chapters:

1. **The corpus geometry** (chapter 3): the token distribution of every position, the chord
   Hellinger distances between them (plug-in, as in P1, and noise-corrected), and the
   effective rank of their double-centred Gram spectrum (chapter 4).
2. **The best fit any encoding can reach** (chapter 4): classical MDS (P1's
   :math:`P_{\mathrm{MDS}}`) at full rank and at low dimension, and the stress-optimal
   (SMACOF) embedding at the same dimensions.
3. **The model's own positions** (chapters 4, 5, 8): raw and scale-optimal stress of its
   position vectors, their separation and their monotonicity violation rate, beside two
   baselines of the model's width (sinusoidal and Gaussian random vectors).
4. **The layers** (chapter 9): projected stress of the positional input through every
   layer's query and key maps, for BERT-architecture encoders.

The result, :class:`AuditReport`, renders as a self-contained HTML page that loads nothing
(inline CSS; interactive Altair charts drawn by vega-embed, whose JavaScript is inlined once;
with ``--static`` the charts are inline SVG and the page has no script) and as a JSON file of
the same numbers; the command line ``posgeo audit`` (see :mod:`posgeo.__main__`) writes both.
Chapter 12 explains every number.

The package, in the order the audit runs:

- :mod:`posgeo.audit.inputs` — the dataset, the model and the options: checked, resolved
  and loaded (:class:`AuditError`, :class:`AuditSettings`);
- :mod:`posgeo.audit.compute` — :func:`audit` and its five steps (the model's position
  vectors, the data, the geometry, stress, the layers), each a function returning a frozen
  dataclass;
- :mod:`posgeo.audit.report` — :class:`AuditReport`, its JSON and HTML, and the
  ``plot_audit_*`` charts.

::

    >>> import posgeo.audit as au
    >>> au.audit_settings("small").n_positions
    48
"""

from __future__ import annotations

from .compute import audit
from .inputs import AuditError, AuditSettings, audit_settings
from .report import (
    AuditReport,
    plot_audit_heatmap,
    plot_audit_layers,
    plot_audit_maps,
    plot_audit_offsets,
    plot_audit_stress,
)

__all__ = [
    'AuditError',
    'AuditSettings',
    'audit_settings',
    'audit',
    'AuditReport',
    'plot_audit_heatmap',
    'plot_audit_offsets',
    'plot_audit_maps',
    'plot_audit_stress',
    'plot_audit_layers',
]
