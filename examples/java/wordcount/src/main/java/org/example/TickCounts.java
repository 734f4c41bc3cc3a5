package org.example;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import org.apache.beam.sdk.Pipeline;
import org.apache.beam.sdk.coders.VarLongCoder;
import org.apache.beam.sdk.options.Description;
import org.apache.beam.sdk.options.PipelineOptionsFactory;
import org.apache.beam.sdk.options.StreamingOptions;
import org.apache.beam.sdk.options.Validation;
import org.apache.beam.sdk.state.StateSpec;
import org.apache.beam.sdk.state.StateSpecs;
import org.apache.beam.sdk.state.TimeDomain;
import org.apache.beam.sdk.state.Timer;
import org.apache.beam.sdk.state.TimerSpec;
import org.apache.beam.sdk.state.TimerSpecs;
import org.apache.beam.sdk.state.ValueState;
import org.apache.beam.sdk.transforms.DoFn;
import org.apache.beam.sdk.transforms.MapElements;
import org.apache.beam.sdk.transforms.ParDo;
import org.apache.beam.sdk.transforms.PeriodicImpulse;
import org.apache.beam.sdk.transforms.windowing.BoundedWindow;
import org.apache.beam.sdk.transforms.windowing.FixedWindows;
import org.apache.beam.sdk.transforms.windowing.IntervalWindow;
import org.apache.beam.sdk.transforms.windowing.Window;
import org.apache.beam.sdk.values.KV;
import org.apache.beam.sdk.values.TypeDescriptors;
import org.joda.time.Duration;
import org.joda.time.Instant;

/**
 * A streaming Beam Java pipeline with no external system: Beam Java's
 * {@link PeriodicImpulse} ticks every 200 ms from {@code --startMillis} for
 * {@code --ticks} ticks; tick i is counted under key {@code k<i % 3>} in
 * 5-second windows by {@link CountAndWrite}, a Java stateful DoFn: a
 * {@link ValueState} per key and window, and an event-time timer at the
 * window's end that writes the count to its own file, {@code
 * <output>/<key>-<window start millis>.txt}, by an atomic rename (a count
 * written again replaces itself). Run with {@code --streaming} and the
 * runner's {@code --checkpointDir}: stopped and submitted again with the
 * same options, it resumes where it stopped; it ends after the last tick.
 */
public final class TickCounts {
  private TickCounts() {}

  /** The pipeline's options; {@code checkpointDir} is the Spark runner's. */
  public interface Options extends StreamingOptions {
    @Description("Epoch millis of the first tick")
    @Validation.Required
    Long getStartMillis();

    void setStartMillis(Long value);

    @Description("How many ticks")
    @Validation.Required
    Integer getTicks();

    void setTicks(Integer value);

    @Description("The directory the counts are written to")
    @Validation.Required
    String getOutput();

    void setOutput(String value);

    @Description("The Spark runner's checkpoint directory (a path or Hadoop file system URI)")
    String getCheckpointDir();

    void setCheckpointDir(String value);
  }

  static final long INTERVAL_MILLIS = 200;

  /** Counts each key's values per window in state; writes the count when the window ends. */
  static final class CountAndWrite extends DoFn<KV<String, String>, Void> {
    private final String output;

    @StateId("count")
    private final StateSpec<ValueState<Long>> countSpec = StateSpecs.value(VarLongCoder.of());

    @TimerId("write")
    private final TimerSpec writeSpec = TimerSpecs.timer(TimeDomain.EVENT_TIME);

    CountAndWrite(String output) {
      this.output = output;
    }

    @ProcessElement
    public void process(
        @Element KV<String, String> element,
        @StateId("count") ValueState<Long> count,
        @TimerId("write") Timer write,
        BoundedWindow window) {
      Long seen = count.read();
      count.write((seen == null ? 0L : seen) + 1);
      write.set(window.maxTimestamp());
    }

    @OnTimer("write")
    public void onWrite(@Key String key, @StateId("count") ValueState<Long> count, BoundedWindow window)
        throws IOException {
      long start = ((IntervalWindow) window).start().getMillis();
      Path dir = Paths.get(output);
      Files.createDirectories(dir);
      Path target = dir.resolve(key + "-" + start + ".txt");
      Path tmp = Files.createTempFile(dir, ".count-", ".tmp");
      Files.write(tmp, String.valueOf(count.read()).getBytes(StandardCharsets.UTF_8));
      Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
      count.clear();
    }
  }


  public static void main(String[] args) {
    Options options = PipelineOptionsFactory.fromArgs(args).withValidation().as(Options.class);
    long start = options.getStartMillis();
    Pipeline p = Pipeline.create(options);
    p.apply(
            "Ticks",
            PeriodicImpulse.create()
                .startAt(new Instant(start))
                .stopAt(new Instant(start + options.getTicks() * INTERVAL_MILLIS))
                .withInterval(Duration.millis(INTERVAL_MILLIS)))
        .apply(
            "Keys",
            MapElements.into(TypeDescriptors.kvs(TypeDescriptors.strings(), TypeDescriptors.strings()))
                .via((Instant tick) -> KV.of("k" + ((tick.getMillis() - start) / INTERVAL_MILLIS) % 3, "1")))
        .apply("Windows", Window.into(FixedWindows.of(Duration.standardSeconds(5))))
        .apply("CountAndWrite", ParDo.of(new CountAndWrite(options.getOutput())));
    p.run().waitUntilFinish();
  }
}
