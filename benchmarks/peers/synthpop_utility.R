# synthpop's utility.gen (method "logit") of a release against its original: the anchor of
# sdcdist's `pmse` and `pmse_ratio`.
#
#   R_LIBS=$HOME/Rlib Rscript benchmarks/peers/synthpop_utility.R --orig A.csv \
#       --syn B.csv [--maxorder 0]
#
# Files as synthpop_cart.R reads them (a column whose values are not all numbers is a
# factor, empty cells missing). maxorder 0 = main effects only, sdcdist's pmse model
# (synthpop's own default is 1: all two-way interactions). Prints one JSON line
# {"pMSE": utility.gen's, "pMSE_tight": the same glm refitted to a deviance tolerance of
#  1e-14, "S_pMSE": ..., "parameters": identified coefficients incl. the intercept,
#  "fitted_records": records glm kept (it drops those with a missing value it has no
#  indicator for), "records": N, "converged": ...} with 17 significant digits.

suppressPackageStartupMessages({
  library(synthpop)
  library(data.table)
})

args <- commandArgs(trailingOnly = TRUE)
opt <- list(maxorder = "0")
for (i in seq(1, length(args), by = 2)) opt[[sub("^--", "", args[i])]] <- args[i + 1]

read_file <- function(path) {
  d <- fread(path, integer64 = "double", na.strings = c("", "NA"), data.table = FALSE,
             showProgress = FALSE)
  for (j in seq_along(d)) {
    if (is.numeric(d[[j]]) || is.logical(d[[j]])) d[[j]] <- as.numeric(d[[j]])
  }
  d
}
orig <- read_file(opt$orig)
syn <- read_file(opt$syn)
# the same factor levels in both files (labels sorted), so the reference category is the
# first label, as in sdcdist
for (j in seq_along(orig)) {
  if (is.character(orig[[j]]) || is.character(syn[[j]])) {
    lv <- sort(unique(c(orig[[j]][!is.na(orig[[j]])], syn[[j]][!is.na(syn[[j]])])))
    orig[[j]] <- factor(orig[[j]], levels = lv)
    syn[[j]] <- factor(syn[[j]], levels = lv)
  }
}
# resamp.method stays NULL for a logit model of a complete synthesis: S_pMSE is pMSE over
# its null expectation (k - 1)(1 - c)^2 c / N
u <- utility.gen(syn, orig, method = "logit", maxorder = as.integer(opt$maxorder),
                 print.flag = FALSE)
fit <- u$fit
# utility.gen's glm stops on a relative deviance change of 1e-8: the same model refitted
# to 1e-14 gives the pMSE its iterations converge to (same records, same N). The refit is
# on the identified columns of glm's design, standardised (the same column space, so the
# same fitted p; unscaled incomes make IRLS's least squares lose digits)
D <- model.matrix(fit)[, !is.na(coef(fit)), drop = FALSE]
D[, -1] <- scale(D[, -1])
tight <- suppressWarnings(glm.fit(D, fit$y, family = binomial(),
                                  control = glm.control(epsilon = 1e-14, maxit = 500)))
N <- nrow(orig) + nrow(syn)
cc <- nrow(syn) / N
cat(sprintf('\n{"pMSE": %.17g, "pMSE_tight": %.17g, "S_pMSE": %.17g, "parameters": %d, "fitted_records": %d, "records": %d, "converged": %s}\n',
            u$pMSE, sum((fitted(tight) - cc)^2) / N, u$S_pMSE, sum(!is.na(coef(fit))),
            nrow(fit$model), N, if (isTRUE(fit$converged)) "true" else "false"))
