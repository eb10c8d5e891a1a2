"""Benchmark decontamination: evaluation sets declared in the shared settings (`sets`), each
indexed once per version of its file (`index`), and a recipe's documents that share an n-gram
with one of their items dropped or cut (`removal`)."""
