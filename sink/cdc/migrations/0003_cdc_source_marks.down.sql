DROP TABLE IF EXISTS cdc_source_marks;
