DROP TABLE IF EXISTS outbox_generations;
