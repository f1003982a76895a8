"""The conventions a cube records: the decisions of CATALOG.md where the papers are
ambiguous, and which of the options' alternatives (DLD's convention and distance, CRL's
correlation, PRL's fit and counting path) an audit used (:func:`conventions`).

Plain data, read by :mod:`sdcdist.cube` (which writes them into every cube) and by the
docs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["CONVENTIONS", "DLD_CONVENTIONS", "DLD_DISTANCES", "CRL_CORRELATIONS", "PRL_FITS",
           "PRL_COUNTING", "conventions"]


#: The decisions of CATALOG.md where the papers are ambiguous, recorded in every cube.
CONVENTIONS = {
    "standardisation": "DRL1: each file z-scored with its own column means and sds (ddof=1)",
    "ties": "t candidates tied at the best distance including the true record count 1/t",
    "keysets": "default key sets are the prefixes of sizes 1..min(7, p) of the key columns",
    "keysets_all": "RR and PDL link on all key columns as one key set unless the spec names "
                   "key sets (then on each named one, averaged); with the default their "
                   "keyset_value is NaN, since the keyset labels are the prefixes",
    "ID1": "ranks from a stable sort of the masked column, interval clamped to 1..n, "
           "bounds included, mean over p = 1..10 %",
    "IL1s": "mean (not sum) of |x - x'| / (sqrt(2) s_j), s_j the original sd (ddof=1)",
    "MV": "zero denominators left out of mean-variation averages, counted in 'excluded'",
    "mixnoise": "X' = X + sqrt(d) Y (not d Y), so Cov(X') = (1+d) Sigma",
    "mixnoise_scaled": "sign of the mean term as in the appendix of Yancey-Winkler-Creecy",
    "RR": "(1/n) sum log(1 + d), not (1/n) log sum d",
    "PRL": "default comparison s: per key column the level of |a - b| against 0, 0.1, 0.25, "
           "0.5, 1 sd of the original column (6 levels, weights ln(m_l/u_l) read linearly in "
           "|a - b| between the middles of neighbouring levels, prl_weights: linear; exact "
           "agreement its own point; chosen by benchmarks/prl.py against Splink and "
           "recordlinkage); the papers' binary l method "
           "on g(v) = sign(v) log(1 + |v|) with t = 0.05 and d/l downweighting is "
           "prl_method: l, prl_t: 0.05; P(M) starts at min(nA, nB)/(nA nB)",
    "PRL_EM": "Winkler's constrained EM: P(M) <= min(nA, nB)/(nA nB), m >= u per column "
              "(cumulatively over a multi-level column's tolerances; a violating column takes "
              "the exact constrained M-step: m and u tie on the pieces between the cuts "
              "where the constraint binds, pooled frequencies and weight 0 when every cut "
              "binds); SQUAREM-accelerated (Varadhan-Roland "
              "SqS3, extrapolations that lower the log-likelihood replaced by the plain EM "
              "step); stops when a plain EM step changes no parameter's logarithm (log P(M), "
              "log m, log u) by 1e-10 or more (not on the log-likelihood), at most 20000 EM "
              "steps, flag 1 if the limit is reached; flag 1 too when the pattern counts do "
              "not identify the fit (observed information at the end point with smallest/"
              "largest eigenvalue below 1e-11: a flat likelihood, other parameters fit as "
              "well), said in the run's warnings",
    "PLD_best": "PLD's weights; each masked record linked to its best-weighted original "
                "record(s), weights compared on a grid of 2**-24 nats (rounded to the nearest "
                "multiple); the true record among t tied best counts 1/t (DLD's rule); no 1-1 "
                "assignment",
    "PRL_TIES": "ties between candidates and between optimal 1-1 assignments are broken by a "
                "64-bit hash of each record's key values (content_order), never by record "
                "position: PLD does not depend on how either file is sorted; records "
                "identical on the keys count their expected hit x / (|H| |G|) (H: the masked "
                "records identical to b, G: the original records identical to b's true "
                "record, x: H's records paired with members of G), in PLD, PLD20 and GDBRL; "
                "the 1-1 assignment works on weights rounded once to multiples of 2^-24 "
                "(nats; distances for GDBRL) held as integers, so equal totals are equal, "
                "and returns the lexicographically smallest optimal assignment with both "
                "files in content order",
    "IR_weights": "individual risk r = 1/f where F <= f (weights below 1), so r stays in "
                  "[0, 1]; sdcMicro's indivRisk uses that rule only at F = f and its "
                  "formula exceeds 1 below it (f = 1, F = 0.5: 1.386)",
    "all_missing_keys": "a record whose categorical keys are all missing matches every "
                        "record and every record matches it, both ways (its f is n, and "
                        "it adds 1 to every other record's f); sdcMicro's freqCalc leaves "
                        "such records out of the others' frequencies (addAllNAtoKeys)",
    "missing_keys": "a missing categorical key value (suppressed) is a wildcard in frequency "
                    "risk; unlinked in DLD, DLD2, DRL2 (the masked record has no block) and "
                    "PDL (no original record links to it); a disagreement on that column in "
                    "PLD/PLD20 (never agrees; the record may still pair through other keys)",
    "attribute_disclosure": "l-diversity, t-closeness, beta-likeness and delta-disclosure "
                            "per class of the categorical keys in the released file: a "
                            "missing key value is a category of its own (no wildcard), a "
                            "missing confidential value is left out; the file's figure is "
                            "the worst class over the confidential columns (pycanon's); "
                            "t-closeness ordered on numeric and tclose_ordered columns, equal "
                            "distance on nominal ones; *_fail = % of classes failing on any "
                            "confidential column",
    "special_uniques": "SUDA2 minimal sample uniques (MSUs) of the categorical keys in the "
                       "released file, as sdcMicro's suda2: a missing key value is never "
                       "part of an MSU and matches nothing; SUDA score = sum over a "
                       "record's MSUs of (m - size)!, m = max(keys, 3); DIS-SUDA with "
                       "sampling fraction suda_dis_fraction in sdcMicro's single "
                       "precision; MSUs up to suda_max_size (default all keys); "
                       "suda_share, suda_mean, dis_suda_mean over all records",
    "synthetic_distances": "DCR, NNDR: SDMetrics 0.32.0's distance (mean over the columns "
                           "both files share, weight left out, of min(|x - y| / R, 1) with R "
                           "the reference file's range, 1 for R = 0 and different values; "
                           "0/1 for categorical codes; missing: 0 if both, 1 if one), "
                           "exact; medians of numpy; a duplicate training record counts "
                           "in NNDR's second distance; NNDR 1 where both distances are 0; "
                           "dcr_baseline's random file drawn per column as SDMetrics "
                           "draws it from the metric's generator; CategoricalCAP: a "
                           "missing value is a value of its own",
    "household_risk": "HR_*: household risk 1 - prod(1 - r_k) over a household's members "
                      "with the individual risk r_k of the frequency metrics (sdcMicro's "
                      "measure_risk with hid, fast_hier); the household id is never masked "
                      "and never a key",
    "model_risk": "modrisk_*: Skinner-Holmes risk of the sample uniques from a Poisson "
                  "log-linear model of every combination of the key levels present "
                  "(sdcMicro's modRisk; modrisk_method, modrisk_formula)",
    "attacks": "so_uni, so_multi, linkability, inference as anonymeter 1.1.0 defines them: "
               "Wilson score rates, risk (r_main - r_control) / (1 - r_control) bounded to "
               "[0, 1] (r_main without a control set); _lo, _hi its interval at "
               "attack_confidence, _base the random-guess baseline's rate, recorded beside "
               "the risk and not ranked on their own; ties broken by a hash",
    "key_roles": "the sampling weight is never a linkage key (left out of default key sets, "
                 "refused in named ones); a constant numeric column (a survey year) is left "
                 "out of the default key sets",
    "constant_columns": "constant columns are accepted; the metrics that divide by a "
                        "column's sd (IL1s, IL1s_sum, R_*, PS, PS2, EMD, EMD1) leave out the "
                        "columns constant in the original file (the other metrics use them)",
    "flag": "1 = an approximation or restriction (sparse assignment, blocking, a PRL EM that "
            "hit its iteration limit or that the pattern counts do not identify, a singling-out control-scale fit that did not converge "
            "and fell back to (n_control + 1) / (n_original + 1)); for PS/PS2 "
            "1 = the fit did not converge, or separated the files completely (U = 0.25 is "
            "then the supremum, the masking is fully distinguishable)",
    "seeds": "SeedSequence(spec seed, spawn_key=(crc32(dataset), crc32(method), "
             "crc32(repr(param)), replicate)); metrics spawn (…, 1, crc32(metric))",
}

#: The conventions of DLD and DLD2 (option ``dld``); a cube records the one it used.
DLD_CONVENTIONS = {
    "catalog": "standardised keys (each file with its own moments), Euclidean, each masked "
               "record linked to its nearest original record(s), t tied candidates count 1/t",
    "dmt": "raw key values, Euclidean, each original record linked to its nearest masked "
           "record(s), a full hit when the true record is among the tied nearest "
           "(reproduces Table 2 of Domingo-Ferrer, Mateo-Sanz and Torra)",
}


#: The distance of DLD and DLD2 (option ``dld_distance``); a cube records the one it used.
DLD_DISTANCES = {
    "default": "Gower on key sets with a categorical column, Euclidean on all-numeric ones",
    "euclidean": "Euclidean on the numeric keys; a key set with categorical columns is "
                 "linked within blocks of equal categories",
    "gower": "Gower (1971): mean over the keys of [a != b] (nominal), |a - b|/(L - 1) "
             "(ordinal, codes in label order), |a - b|/range of the original column "
             "(numeric), 1 for a missing value; totals in exact integer units (terms on a "
             "decimal grid exact, others rounded to 2^-52 of the largest total)",
}

#: The correlations CRL picks its attribute pairs by (option ``crl_correlation``).
CRL_CORRELATIONS = {
    "pearson": "Pearson's correlations over the matching records",
    "spearman": "Spearman's correlations (mid-ranks, pairwise complete) over the matching "
                "records; ordinal categorical columns by their codes, nominal ones left out",
}

#: What the PRL EM fits (``prl_em`` key ``fit``); a cube records the one it used.
PRL_FITS = {
    "joint": "m, u and P(M) by the constrained EM (PRL_EM)",
    "m_only": "u = the level frequencies over all compared pairs and P(M) = min(nA, nB)/pairs, "
              "both fixed; only m by EM (plain M-step, no m >= u constraint); the same "
              "guard and stopping rule",
}


#: How PRL obtains its pattern counts (option ``prl_counting``); the counts are the same.
PRL_COUNTING = {
    "auto": "count exactly without enumerating the pairs from 2**32 pairs on, unless that "
            "would be slower (then every pair compared); all pairs below; the candidates "
            "by branch and bound from 2**24 pairs on (the same candidates), all pairs below",
    "pairs": "every pair compared (pattern codes counted in a dense histogram up to 2**26 "
             "patterns, in a hash table above; the same integers)",
    "count": "counted exactly without enumerating the pairs (sorted ranks, wavelet box "
             "counts, inclusion-exclusion); identical to all pairs",
}


def conventions(options: Mapping[str, Any] | None = None) -> dict[str, str]:
    """:data:`CONVENTIONS` with the DLD convention chosen by ``options`` (``dld``) and
    the PRL counting path (``prl_counting``)."""
    dld = (options or {}).get("dld") or "catalog"
    pc = (options or {}).get("prl_counting") or "auto"
    fit = ((options or {}).get("prl_em") or {}).get("fit") or "joint"
    dist = (options or {}).get("dld_distance") or "default"
    corr = (options or {}).get("crl_correlation") or "pearson"
    return dict(CONVENTIONS, DLD=f"{dld}: {DLD_CONVENTIONS[dld]}",
                DLD_distance=f"{dist}: {DLD_DISTANCES[dist]}",
                CRL_correlation=f"{corr}: {CRL_CORRELATIONS[corr]}",
                PRL_counting=f"{pc}: {PRL_COUNTING[pc]}", PRL_fit=f"{fit}: {PRL_FITS[fit]}")
