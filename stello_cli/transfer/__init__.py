"""`stello export` and `stello import` (`commands`, which describes the file): the file's pieces
(`exports`), what an export reads (`export_reads`), and an import's reading of the file
(`import_file`) and its calls (`importer`)."""
