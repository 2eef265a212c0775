#!/usr/bin/env python3
"""spark_index.py REQUEST.json RESULT.json: Spark's own Parquet reader and writer against the dataset package.

REQUEST.json is {"read": [DIR, ...], "write": [{"dir": DIR, "rows": [[tensor_key, file_name, shape, dtype], ...]}]}.
For every DIR of "read", spark.read.parquet(DIR/_tensor_index.parquet) reads the index the Go package wrote:
RESULT.json gets its schema and rows. For every entry of "write", Spark writes the rows as the connector
writes its index (the same schema, df.write.parquet into DIR/_tensor_index.parquet), for the Go package to
read. Needs pyspark (pinned by the caller) and Java 17; binds to the loopback address only."""
import json
import os
import sys

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark.sql import SparkSession
from pyspark.sql.types import ArrayType, IntegerType, StringType, StructField, StructType

req = json.load(open(sys.argv[1]))
spark = (SparkSession.builder.master("local[2]").appName("safetensors-go-interop")
         .config("spark.ui.enabled", "false").config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")

result = {"read": {}}
for d in req.get("read", []):
    df = spark.read.parquet(os.path.join(d, "_tensor_index.parquet"))
    result["read"][d] = {
        "schema": [[f.name, f.dataType.simpleString()] for f in df.schema.fields],
        "rows": [[r["tensor_key"], r["file_name"], list(r["shape"]), r["dtype"]] for r in df.collect()],
    }

# The connector's index schema (SafetensorsBatchWrite.writeTensorIndex).
schema = StructType([StructField("tensor_key", StringType(), False), StructField("file_name", StringType(), False),
                     StructField("shape", ArrayType(IntegerType()), False), StructField("dtype", StringType(), False)])
for w in req.get("write", []):
    rows = [tuple(r) for r in w["rows"]]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 2), schema)
    df.write.mode("overwrite").parquet(os.path.join(w["dir"], "_tensor_index.parquet"))

json.dump(result, open(sys.argv[2], "w"))
spark.stop()
