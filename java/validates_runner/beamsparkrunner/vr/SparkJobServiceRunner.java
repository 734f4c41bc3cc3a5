package beamsparkrunner.vr;

import org.apache.beam.runners.portability.PortableRunner;
import org.apache.beam.sdk.Pipeline;
import org.apache.beam.sdk.PipelineResult;
import org.apache.beam.sdk.PipelineRunner;
import org.apache.beam.sdk.metrics.MetricNameFilter;
import org.apache.beam.sdk.metrics.MetricQueryResults;
import org.apache.beam.sdk.metrics.MetricResult;
import org.apache.beam.sdk.metrics.MetricsFilter;
import org.apache.beam.sdk.options.PipelineOptions;
import org.apache.beam.sdk.options.PortablePipelineOptions;
import org.apache.beam.sdk.testing.PAssert;

/**
 * The runner Beam's {@code TestPipeline} uses for the ValidatesRunner suite: the pipeline goes
 * through Beam Java's own {@code PortableRunner} to the job service at {@code --jobEndpoint} (the
 * beam-spark-runner job server), and the run must end DONE with every PAssert of the pipeline
 * counted as a success in the job's metrics and none as a failure.
 *
 * <p>Counting the asserts' successes, as Beam's Dataflow test runner does, is what makes a pass
 * mean something: a runner that skipped an assertion's stage, or ran it over no elements where
 * it should not have, would still end DONE.
 */
public class SparkJobServiceRunner extends PipelineRunner<PipelineResult> {
  /** Pipelines this JVM submitted: a test that passed without one is not counted as a runner pass. */
  static final java.util.concurrent.atomic.AtomicInteger SUBMITTED =
      new java.util.concurrent.atomic.AtomicInteger();

  private final PortablePipelineOptions options;

  private SparkJobServiceRunner(PortablePipelineOptions options) {
    this.options = options;
  }

  public static SparkJobServiceRunner fromOptions(PipelineOptions options) {
    return new SparkJobServiceRunner(options.as(PortablePipelineOptions.class));
  }

  @Override
  public PipelineResult run(Pipeline pipeline) {
    if (options.getJobEndpoint() == null || options.getJobEndpoint().isEmpty()) {
      throw new IllegalArgumentException("--jobEndpoint (the beam-spark-job-server's address) is required");
    }
    int expectedAsserts = PAssert.countAsserts(pipeline);
    options.setRunner(PortableRunner.class);
    PipelineResult result = PortableRunner.fromOptions(options).run(pipeline);
    SUBMITTED.incrementAndGet();
    // Beam's waitUntilFinish asks for the job's state every 3 seconds, so a
    // test whose pipeline ran in one second took up to three more: asked
    // here every 100 ms until the job ends, it returns at its first ask.
    while (!result.getState().isTerminal()) {
      try {
        Thread.sleep(100);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new RuntimeException("Interrupted waiting for the job to end", e);
      }
    }
    PipelineResult.State state = result.waitUntilFinish();
    if (state != PipelineResult.State.DONE) {
      throw new AssertionError("The pipeline ended " + state + ", not DONE");
    }
    MetricQueryResults metrics =
        result
            .metrics()
            .queryMetrics(
                MetricsFilter.builder()
                    .addNameFilter(MetricNameFilter.named(PAssert.class, PAssert.SUCCESS_COUNTER))
                    .addNameFilter(MetricNameFilter.named(PAssert.class, PAssert.FAILURE_COUNTER))
                    .build());
    long successes = 0;
    long failures = 0;
    for (MetricResult<Long> counter : metrics.getCounters()) {
      long value = counter.getAttempted();
      if (PAssert.SUCCESS_COUNTER.equals(counter.getName().getName())) {
        successes += value;
      } else {
        failures += value;
      }
    }
    if (failures > 0) {
      throw new AssertionError(failures + " PAssert assertions failed");
    }
    if (successes < expectedAsserts) {
      throw new AssertionError(
          "The pipeline has " + expectedAsserts + " PAssert assertions but only " + successes
              + " reported a success: an assertion's stage did not run");
    }
    return result;
  }
}
