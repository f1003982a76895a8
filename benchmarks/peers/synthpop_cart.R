# synthpop's sequential CART synthesis (syn(), method "cart") of a CSV file: the anchor of
# sdcdist's `cart` generator. Never an sdcdist dependency; installed into a library of its
# own by benchmarks/peers/setup.sh (install_synthpop).
#
#   R_LIBS=$HOME/Rlib Rscript benchmarks/peers/synthpop_cart.R --in IN.csv --out OUT.csv \
#       --minbucket M --seed S [--synth col1,col2,...] [--keep-collinear 1]
#
# The file: a header of column names. A column whose values are not all numbers is
# categorical (a factor; its labels, e.g. "c3", are written back as they came); the
# others are numeric. An empty cell is a missing value.
#
# The synthesis matches sdcdist's `cart` defaults (sdcdist/masking/cart.py):
# - --synth names the replaced columns (default: every column); the others are kept
#   (synthpop's partially synthetic use: method "" and first in the visit sequence, so
#   they are predictors of every replaced column and are released as they are);
# - the replaced columns are visited in the file's order (sdcdist's `synth_order`
#   default); each is predicted from the kept columns and the replaced ones before it;
# - method "cart" with rpart's minbucket = M (cart.minbucket; cp stays synthpop's 1e-8),
#   no smoothing; with no kept column the first replaced column is synthpop's "sample"
#   (a bootstrap sample of its values), as syn() does by default;
# - the release has the original's number of records (k = n), in the original's order
#   (row i keeps the kept values of original row i).
#
# --keep-collinear 1 (a diagnosis, not synthpop's behaviour): synthpop's remove.lindep.syn,
# which drops before each fit the predictors that are constant, correlated >= 0.99999 with
# the response, or linearly dependent on the others, is replaced by one keeping them all
# (as sdcdist's cart does).
#
# Prints one JSON line: {"seconds": wall seconds of syn() (fit + sample),
# "cpu": its user + system CPU seconds, "n": records, "m": columns,
# "synthpop": version, "minbucket": M, "seed": S}.

suppressPackageStartupMessages({
  library(synthpop)
  library(data.table)
})

args <- commandArgs(trailingOnly = TRUE)
opt <- list(synth = NULL)
i <- 1
while (i <= length(args)) {
  key <- args[i]
  if (!key %in% c("--in", "--out", "--minbucket", "--seed", "--synth", "--keep-collinear") ||
      i == length(args))
    stop("usage: synthpop_cart.R --in IN.csv --out OUT.csv --minbucket M --seed S ",
         "[--synth col1,col2,...]", call. = FALSE)
  opt[[sub("^--", "", key)]] <- args[i + 1]
  i <- i + 2
}
for (need in c("in", "out", "minbucket", "seed"))
  if (is.null(opt[[need]])) stop("missing --", need, call. = FALSE)
minbucket <- as.integer(opt$minbucket)
seed <- as.integer(opt$seed)
if (is.na(minbucket) || minbucket < 1) stop("--minbucket must be an integer >= 1", call. = FALSE)

data <- fread(opt[["in"]], integer64 = "double", na.strings = c("", "NA"),
              data.table = FALSE, showProgress = FALSE)
cols <- names(data)
is_cat <- !vapply(data, is.numeric, logical(1)) & !vapply(data, is.logical, logical(1))
# an all-missing column reads as logical: numeric
for (j in seq_along(data)) {
  if (is_cat[j]) data[[j]] <- factor(data[[j]], levels = sort(unique(data[[j]][!is.na(data[[j]])])))
  else data[[j]] <- as.numeric(data[[j]])
}

synth <- if (is.null(opt$synth)) cols else strsplit(opt$synth, ",", fixed = TRUE)[[1]]
unknown <- setdiff(synth, cols)
if (length(unknown)) stop("--synth names unknown column(s): ", paste(unknown, collapse = ", "),
                          call. = FALSE)
if (anyDuplicated(synth)) stop("--synth names a column twice", call. = FALSE)
replaced <- cols[cols %in% synth]            # file order = sdcdist's synth_order default
kept <- cols[!cols %in% synth]

method <- ifelse(cols %in% replaced, "cart", "")
if (!length(kept)) method[match(replaced[1], cols)] <- "sample"
visit <- match(c(kept, replaced), cols)

if (identical(opt[["keep-collinear"]], "1")) {
  ns <- asNamespace("synthpop")
  unlockBinding("remove.lindep.syn", ns)
  assign("remove.lindep.syn", function(x, y, ...) if (ncol(x) == 0) NULL else rep(TRUE, ncol(x)),
         envir = ns)
}

t0 <- proc.time()
s <- syn(data, method = method, visit.sequence = visit, m = 1, k = nrow(data),
         cart.minbucket = minbucket, smoothing = "", seed = seed, print.flag = FALSE,
         drop.not.used = FALSE, drop.pred.only = FALSE, models = FALSE)
t1 <- proc.time()

out <- s$syn[, cols, drop = FALSE]
exact_text <- function(x) {                 # 15 significant digits where they round-trip
  s <- sprintf("%.15g", x)
  bad <- !is.na(x) & as.numeric(s) != x
  s[bad] <- sprintf("%.17g", x[bad])
  s[is.na(x)] <- NA
  s
}
for (j in seq_along(out))
  out[[j]] <- if (is.factor(out[[j]])) {
    v <- as.character(out[[j]])
    v[v %in% "NAtemp"] <- NA                  # synthpop's own label of a missing category
    v
  } else exact_text(out[[j]])
fwrite(out, opt$out, na = "")
d <- t1 - t0
cat(sprintf(paste0('\n{"seconds": %.4f, "cpu": %.4f, "n": %d, "m": %d, "synthpop": "%s", ',
                   '"minbucket": %d, "seed": %d}\n'),
            d[["elapsed"]], d[["user.self"]] + d[["sys.self"]], nrow(out), ncol(out),
            format(packageVersion("synthpop")), minbucket, seed))
