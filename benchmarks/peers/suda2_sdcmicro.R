# sdcMicro's suda2 on the SUDA2 reference cases of benchmarks/peers/suda2_cases.json
# (the household reference file; system R):
#   Rscript benchmarks/peers/suda2_sdcmicro.R > tests/data/suda2_reference.json
# A case names the keys and optionally original_scores, dis_fraction (DisFraction), missing
# (the code treated as missing) and na: {column: [k, r]} sets the column missing in the
# records whose (1-based) row number is r modulo k. Prints, per case, the SUDA and DIS-SUDA
# scores of every record with a positive score (row number: [score, dis]), the number of
# such records and sdcMicro's attribute contributions (%), numbers as text with 17 digits.
suppressMessages(library(sdcMicro))
library(jsonlite)
cases <- fromJSON("benchmarks/peers/suda2_cases.json", simplifyVector = TRUE)
d0 <- read.csv("sdcdist/data/reference/household.csv")
out <- list(tool = paste("sdcMicro", as.character(packageVersion("sdcMicro"))))
for (name in names(cases)) {
  cs <- cases[[name]]
  d <- d0[, cs$keys]
  if (!is.null(cs$na)) {
    for (col in names(cs$na)) {
      kr <- cs$na[[col]]
      d[seq_len(nrow(d)) %% kr[1] == kr[2], col] <- NA
    }
  }
  os <- if (is.null(cs$original_scores)) TRUE else cs$original_scores
  df <- if (is.null(cs$dis_fraction)) 0.01 else cs$dis_fraction
  miss <- if (is.null(cs$missing)) -999 else cs$missing
  s <- suppressWarnings(suda2(d, variables = cs$keys, missing = miss, DisFraction = df,
                              original_scores = os))
  pos <- which(s$score > 0)
  g <- function(x) sprintf("%.17g", x)   # every digit (as text: JSON numbers keep 15)
  scored <- lapply(pos, function(i) c(g(s$score[i]), g(s$disScore[i])))
  names(scored) <- as.character(pos)
  out[[name]] <- list(scored = scored, n_scored = length(pos),
                      contributions = as.list(setNames(g(s$attribute_contributions$contribution),
                                                       s$attribute_contributions$variable)))
}
cat(toJSON(out, auto_unbox = TRUE, pretty = FALSE), "\n")
