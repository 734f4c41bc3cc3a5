"""Pipeline proto -> execution plan. Pure planning: no SparkSession needed."""
