-- The inventory example's tables (examples/inventory/pipeline.yaml writes history and
-- stock in one transaction per batch, with the partition's offset).
CREATE SCHEMA IF NOT EXISTS inventory;

-- The warehouses stock is kept for.
CREATE TABLE IF NOT EXISTS inventory.warehouses (
    warehouse text PRIMARY KEY
);
INSERT INTO inventory.warehouses VALUES ('wh-0'), ('wh-1'), ('wh-2'), ('wh-3'), ('wh-4')
ON CONFLICT DO NOTHING;

-- Every stock move, once: move_id is unique.
CREATE TABLE IF NOT EXISTS inventory.history (
    move_id   text PRIMARY KEY,
    sku       text NOT NULL,
    warehouse text NOT NULL,
    delta     integer NOT NULL,
    at        timestamptz NOT NULL
);

-- Current stock per (sku, warehouse): the sum of its moves. A move to a warehouse that is
-- not in warehouses breaks the foreign key: the record is dead-lettered, and its history
-- row, written in the same transaction, is rolled back with it.
CREATE TABLE IF NOT EXISTS inventory.stock (
    sku        text NOT NULL,
    warehouse  text NOT NULL REFERENCES inventory.warehouses,
    qty        bigint NOT NULL,
    updated_at timestamptz,
    PRIMARY KEY (sku, warehouse)
);
