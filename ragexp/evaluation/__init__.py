"""One evaluated run, without MLflow: the prepared data, the built pipeline, retrieval and
generation scored apart (or a black-box system's responses), the portable results, and its judge
metrics corrected by human labels."""
