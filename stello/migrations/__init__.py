"""The schema's migrations: `NNNN_what_it_does.sql`, applied in name order, once each, by
`stello migrate` (`stello.db.migrate`, which reads them as package resources). A landed file
never changes; a later one corrects it (docs/architecture.md, "Adding a migration").
"""
