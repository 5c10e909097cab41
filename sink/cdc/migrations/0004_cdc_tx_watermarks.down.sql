DROP TABLE cdc_tx_watermarks;
