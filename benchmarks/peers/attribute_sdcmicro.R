# sdcMicro's ldiversity on the attribute-disclosure reference cases (system R).
#   Rscript benchmarks/peers/attribute_sdcmicro.R > out.json
# Prints a JSON object {case: {measure: value}}: the smallest distinct, entropy and recursive
# (c = 2) l-diversity over the records (= over the key classes), and the % of key classes
# below l = 2. tests/data/attribute_reference.json holds its output (with pycanon's).
suppressMessages(library(sdcMicro))
library(jsonlite)
cases <- fromJSON("benchmarks/peers/attribute_cases.json", simplifyVector = TRUE)
out <- list(tool = paste("sdcMicro", as.character(packageVersion("sdcMicro"))))
for (name in names(cases)) {
  cs <- cases[[name]]
  d <- read.csv(cs$file)
  res <- ldiversity(d, keyVars = cs$keys, ldiv_index = cs$confidential, l_recurs_c = 2)
  conf <- cs$confidential[1]
  dist <- res[, paste0(conf, "_Distinct_Ldiversity")]
  ent <- res[, paste0(conf, "_Entropy_Ldiversity")]
  rec <- res[, paste0(conf, "_Recursive_Ldiversity")]
  cls <- interaction(d[, cs$keys], drop = TRUE)
  first <- !duplicated(cls)
  out[[name]] <- list(
    ldiv_distinct = min(dist), ldiv_entropy = min(ent), ldiv_recursive = min(rec),
    classes = sum(first),
    ldiv_distinct_fail = 100 * mean(dist[first] < 2),
    ldiv_entropy_fail = 100 * mean(ent[first] < 2),
    ldiv_recursive_fail = 100 * mean(rec[first] < 2))
}
cat(toJSON(out, auto_unbox = TRUE, digits = NA, pretty = TRUE), "\n")
