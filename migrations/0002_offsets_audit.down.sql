DROP TABLE IF EXISTS offsets_audit;
