-- The sale's item. `stock` has no CHECK constraint on purpose: the naive strategy must be able
-- to drive it negative, exactly like the incident, and the oracle flags it.
CREATE TABLE IF NOT EXISTS items (
    id             BIGINT PRIMARY KEY,
    name           TEXT NOT NULL,
    price_cents    BIGINT NOT NULL,
    initial_stock  BIGINT NOT NULL,
    stock          BIGINT NOT NULL,
    version        BIGINT NOT NULL DEFAULT 0,
    purchase_limit BIGINT NOT NULL,
    stream_applied VARCHAR(64) NOT NULL DEFAULT '0-0',
    updated_at_ms  BIGINT NOT NULL
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS orders (
    id            VARCHAR(64) PRIMARY KEY,
    item_id       BIGINT NOT NULL,
    user_id       VARCHAR(128) NOT NULL,
    device_id     VARCHAR(128),
    qty           BIGINT NOT NULL,
    status        VARCHAR(24) NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    INDEX orders_item_user (item_id, user_id),
    INDEX orders_item_status (item_id, status, created_at_ms)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS reconciliations (
    id            BIGINT AUTO_INCREMENT PRIMARY KEY,
    item_id       BIGINT NOT NULL,
    at_ms         BIGINT NOT NULL,
    redis_stock   BIGINT NOT NULL,
    expected      BIGINT NOT NULL,
    residual      BIGINT NOT NULL,
    corrected     BIGINT NOT NULL
) ENGINE = InnoDB;
