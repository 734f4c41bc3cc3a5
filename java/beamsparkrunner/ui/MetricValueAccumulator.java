package beamsparkrunner.ui;

import org.apache.spark.util.AccumulatorV2;

/**
 * One Beam metric's value, as the text the Spark UI shows beside the
 * accumulator's name on a stage page.
 *
 * <p>The value is set, not summed: the Python driver has already aggregated
 * the metric over every task (with Beam's own rules for counters,
 * distributions, gauges, string sets and bounded tries), so the last value
 * set wins. The empty string is the zero value.
 */
public final class MetricValueAccumulator extends AccumulatorV2<String, String> {
  private static final long serialVersionUID = 1L;

  private String text = "";

  @Override
  public boolean isZero() {
    return text.isEmpty();
  }

  @Override
  public MetricValueAccumulator copy() {
    MetricValueAccumulator copy = new MetricValueAccumulator();
    copy.text = text;
    return copy;
  }

  @Override
  public void reset() {
    text = "";
  }

  @Override
  public void add(String value) {
    text = value == null ? "" : value;
  }

  @Override
  public void merge(AccumulatorV2<String, String> other) {
    if (!other.isZero()) {
      text = other.value();
    }
  }

  @Override
  public String value() {
    return text;
  }
}
