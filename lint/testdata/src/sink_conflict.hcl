pipeline "sc" {
  task "clean" {
    command = ["./clean.sh"]
    outputs = ["orders", "customers", "items", "refunds"]
    timeout = "10m"
  }
  check "orders_ok" {
    input         = "orders"
    row_count_min = 1
  }
  check "customers_ok" {
    input         = "customers"
    row_count_min = 1
  }
  check "items_ok" {
    input         = "items"
    row_count_min = 1
  }
  check "refunds_ok" {
    input         = "refunds"
    row_count_min = 1
  }
  sink "orders" {
    type = "directory"
    path = "warehouse/orders"
  }
  sink "orders_again" {
    type = "directory"
    path = "./warehouse//orders/" // want "sink-conflict: sink .orders_again. publishes into the folder of sink .orders."
  }
  sink "nested" {
    type = "directory"
    path = "warehouse/orders/2024" // want "sink-conflict: publishes inside the folder of sink .orders."
  }
  sink "items" {
    type = "directory"
    path = "warehouse/items"
  }
  sink "side" {
    type = "directory"
    path = "warehouse/orders-side"
  }
  sink "bucket" {
    type    = "s3"
    path    = "warehouse/orders" # want "local-artifact: not an s3:// URL"
    fencing = "token"
  }
  sink "lake" {
    type    = "s3"
    path    = "s3://lake/orders"
    fencing = "token"
  }
  sink "lake_again" {
    type    = "s3"
    path    = "s3://lake//orders/" // want "sink-conflict: sink .lake_again. publishes into the prefix of sink .lake."
    fencing = "token"
  }
  sink "lake_nested" {
    type    = "s3"
    path    = "s3://lake/orders/2024" // want "sink-conflict: publishes inside the prefix of sink .lake."
    fencing = "token"
  }
  # Near misses: another bucket, a sibling prefix, a folder of the same name.
  sink "other_bucket" {
    type    = "s3"
    path    = "s3://lake-eu/orders"
    fencing = "token"
  }
  sink "lake_side" {
    type    = "s3"
    path    = "s3://lake/orders-side"
    fencing = "token"
  }
  sink "lake_folder" {
    type = "directory"
    path = "lake/orders"
  }
  publish "orders_mart" {
    artifact = "orders"
    sink     = "orders"
  }
  publish "customers_mart" {
    artifact = "customers"
    sink     = "orders_again"
  }
  publish "items_mart" {
    artifact = "items"
    sink     = "items"
  }
  publish "refunds_mart" {
    artifact = "refunds"
    sink     = "items" // want "sink-conflict: publish .refunds_mart. writes to sink .items., as publish .items_mart."
  }
  publish "refunds_side" {
    artifact = "refunds"
    sink     = "side"
  }
  publish "refunds_bucket" {
    artifact = "refunds"
    sink     = "bucket"
  }
  publish "orders_bucket" {
    artifact = "orders"
    sink     = "bucket"
  }
  publish "orders_lake" {
    artifact = "orders"
    sink     = "lake"
  }
  publish "items_lake" {
    artifact = "items"
    sink     = "lake" // want "sink-conflict: publish .items_lake. writes to sink .lake., as publish .orders_lake. .line [0-9]+. does: both swap one pointer object per interval"
  }
  publish "items_other" {
    artifact = "items"
    sink     = "other_bucket"
  }
  publish "items_side" {
    artifact = "items"
    sink     = "lake_side"
  }
  publish "items_folder" {
    artifact = "items"
    sink     = "lake_folder"
  }
}
