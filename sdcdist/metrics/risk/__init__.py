"""Disclosure risk: what an intruder learns from the released file.

One module per family of measures, each registering its metrics on import
(``sdcdist.metrics`` imports them in the catalogue's order): :mod:`.linkage`
(distance, rank and correlation linkage, interval disclosure), :mod:`.prl`
(probabilistic record linkage), :mod:`.frequency` (key-combination frequencies),
:mod:`.attribute` (what a key class discloses), :mod:`.household`, :mod:`.modrisk`
(log-linear models), :mod:`.suda` (special uniques), :mod:`.synthetic` (DCR, NNDR,
CAP) and the package :mod:`.attacks` (singling out, linkability, inference).
"""
