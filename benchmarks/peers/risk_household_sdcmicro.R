# sdcMicro's household (hierarchical) risk and model-based risk on the household file
# (system R).
#   Rscript benchmarks/peers/risk_household_sdcmicro.R [household.csv] > out.json
# Prints a JSON object: for each household case, measure_risk(..., hid = "ori_hid")'s
# hier_risk, hier_risk_ER, global_risk and checksums of the per-record hierarchical risk; for
# each model case, modRisk's gr1 and gr2 (key columns as factors). Missing values: in the
# "missing" cases roof is missing in records 7, 14, ... and sex in records 11, 22, ...
# (1-based); the model cases use the weights pop_weight (household_weights x 1000) and
# pop_weight_c (sampling_weight x 1000). tests/data/household_reference.json holds its output.
suppressMessages(library(sdcMicro))
library(jsonlite)
args <- commandArgs(trailingOnly = TRUE)
path <- if (length(args) >= 1) args[1] else "sdcdist/data/reference/household.csv"
d0 <- read.csv(path)
# population-scale weights (a sampling fraction well below 1 in every key cell): with the
# file's own weights some large cells have sum(1/w) > 1, where modRisk's exp() overflows and
# its sum over the sample uniques turns NaN (Inf * 0)
d0$pop_weight <- d0$household_weights * 1000
d0$pop_weight_c <- d0$sampling_weight * 1000
with_missing <- function(d) {
  i <- seq_len(nrow(d))
  d$roof[i %% 7 == 0] <- NA
  d$sex[i %% 11 == 0] <- NA
  d
}
out <- list(tool = paste("sdcMicro", as.character(packageVersion("sdcMicro"))))
hh <- list(
  hh_weighted = list(keys = c("urbrur", "roof", "walls", "water", "sex"),
                     w = "sampling_weight", missing = FALSE),
  hh_unweighted = list(keys = c("urbrur", "roof", "walls", "water", "sex"),
                       w = NULL, missing = FALSE),
  hh_age = list(keys = c("urbrur", "water", "sex", "age"), w = "household_weights",
                missing = FALSE),
  hh_missing = list(keys = c("urbrur", "roof", "walls", "water", "sex"),
                    w = "household_weights", missing = TRUE))
for (name in names(hh)) {
  cs <- hh[[name]]
  d <- if (cs$missing) with_missing(d0) else d0
  r <- measure_risk(d, keyVars = cs$keys, w = cs$w, hid = "ori_hid")
  h <- r$Res[, "hier_risk"]
  out[[name]] <- list(hier_risk = r$hier_risk, hier_risk_ER = r$hier_risk_ER,
                      hier_risk_pct = r$hier_risk_pct, global_risk = r$global_risk,
                      global_risk_ER = r$global_risk_ER, hier_max = max(h),
                      hier_index_weighted = sum(seq_along(h) * h) / length(h))
}
md <- list(
  m_small = list(formula = "~ sex + water + roof", w = "pop_weight_c", missing = FALSE,
                 bound = Inf,
                 methods = c("default", "CE", "PML", "weightedLLM", "IPF")),
  m_age = list(formula = "~ urbrur + water + sex + age", w = "pop_weight",
               missing = FALSE, bound = Inf,
               methods = c("default", "CE", "PML", "weightedLLM", "IPF")),
  m_inter = list(formula = "~ sex + water + roof + sex:water", w = "pop_weight",
                 missing = FALSE, bound = Inf,
                 methods = c("default", "CE", "PML", "weightedLLM")),
  m_bound = list(formula = "~ urbrur + water + sex + age", w = "pop_weight",
                 missing = FALSE, bound = 5, methods = c("default", "CE")),
  m_missing = list(formula = "~ urbrur + roof + water + sex + age", w = "pop_weight",
                   missing = TRUE, bound = Inf,
                   methods = c("default", "CE", "PML", "weightedLLM", "IPF")))
for (name in names(md)) {
  cs <- md[[name]]
  d <- if (cs$missing) with_missing(d0) else d0
  f <- as.formula(cs$formula)
  vars <- all.vars(f)
  x <- d[, c(vars, cs$w)]
  for (v in vars) x[[v]] <- factor(x[[v]])
  res <- list(formula = cs$formula, weight = cs$w, bound = if (is.finite(cs$bound)) cs$bound else NULL)
  for (m in cs$methods) {
    r <- suppressWarnings(modRisk(x, method = m, weights = cs$w, formulaM = f, bound = cs$bound))
    res[[m]] <- list(gr1 = r$gr1, gr2 = r$gr2)
  }
  out[[name]] <- res
}
cat(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE), "\n")
