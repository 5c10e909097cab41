DROP TABLE IF EXISTS cdc_positions;
