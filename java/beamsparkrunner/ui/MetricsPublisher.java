package beamsparkrunner.ui;

import java.util.Collections;
import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaSparkContext;

/**
 * Shows Beam metrics in the Spark UI.
 *
 * <p>Spark's UI lists a named accumulator on the page of every stage whose
 * tasks updated it. Beam metrics are updated in Python workers, which can
 * only reach PySpark's single unnamed accumulator, so the runner's driver
 * aggregates them and calls {@link #publish}: a one-task Spark job whose
 * task sets one named {@link MetricValueAccumulator} per metric. The job
 * carries the given description (Jobs page) and its stage page lists the
 * metrics by name with their values.
 */
public final class MetricsPublisher {
  /** The local property Spark shows as a job's description (SparkContext.SPARK_JOB_DESCRIPTION). */
  private static final String JOB_DESCRIPTION = "spark.job.description";

  private MetricsPublisher() {}

  /**
   * Runs the publishing job on the calling thread (so it belongs to the
   * caller's job group and is cancelled with it).
   *
   * @param names accumulator names, one per metric
   * @param values the metrics' values as text, in the order of {@code names}
   */
  public static void publish(JavaSparkContext jsc, String description, String[] names, String[] values) {
    if (names.length != values.length) {
      throw new IllegalArgumentException(
          "MetricsPublisher.publish: " + names.length + " names but " + values.length + " values");
    }
    SparkContext sc = jsc.sc();
    final MetricValueAccumulator[] accumulators = new MetricValueAccumulator[names.length];
    for (int i = 0; i < names.length; i++) {
      accumulators[i] = new MetricValueAccumulator();
      sc.register(accumulators[i], names[i]);
    }
    final String[] texts = values.clone();
    String previous = sc.getLocalProperty(JOB_DESCRIPTION);
    sc.setLocalProperty(JOB_DESCRIPTION, description);
    try {
      jsc.parallelize(Collections.singletonList(0), 1).foreach(ignored -> {
        for (int i = 0; i < accumulators.length; i++) {
          accumulators[i].add(texts[i]);
        }
      });
    } finally {
      sc.setLocalProperty(JOB_DESCRIPTION, previous);
    }
  }
}
