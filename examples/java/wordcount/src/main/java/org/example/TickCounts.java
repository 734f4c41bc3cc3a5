package org.example;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
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
import org.apache.beam.sdk.transforms.Impulse;
import org.apache.beam.sdk.transforms.ParDo;
import org.apache.beam.sdk.transforms.PeriodicSequence;
import org.apache.beam.sdk.transforms.windowing.BoundedWindow;
import org.apache.beam.sdk.transforms.windowing.FixedWindows;
import org.apache.beam.sdk.transforms.windowing.IntervalWindow;
import org.apache.beam.sdk.transforms.windowing.Window;
import org.apache.beam.sdk.values.KV;
import org.joda.time.Duration;
import org.joda.time.Instant;

/**
 * A streaming Beam Java pipeline with no external system: Beam Java's
 * {@link PeriodicSequence} ticks every 200 ms for {@code --ticks} ticks;
 * tick i is counted under key {@code k<i % 3>} in 5-second windows by
 * {@link CountAndWrite}, a Java stateful DoFn: a {@link ValueState} per key
 * and window, and an event-time timer at the window's end that writes the
 * count to its own file, {@code <output>/<key>-<window start millis>.txt},
 * by an atomic rename (a count written again replaces itself).
 *
 * <p>The ticks start a second after the run's first bundle, which writes
 * that start to {@code --startFile}; a run submitted again reads it from
 * there. Run with {@code --streaming} and the runner's {@code
 * --checkpointDir}: stopped and submitted again with the same options, it
 * resumes where it stopped; it ends after the last tick.
 */
public final class TickCounts {
  private TickCounts() {}

  /** The pipeline's options; {@code checkpointDir} is the Spark runner's. */
  public interface Options extends StreamingOptions {
    @Description("Where the first run records when the ticks start (epoch millis), for the runs after it")
    @Validation.Required
    String getStartFile();

    void setStartFile(String value);

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


  /** The ticks' definition, their start read from the start file or written there now. */
  static final class Ticks extends DoFn<byte[], PeriodicSequence.SequenceDefinition> {
    private final String startFile;
    private final int ticks;

    Ticks(String startFile, int ticks) {
      this.startFile = startFile;
      this.ticks = ticks;
    }

    @ProcessElement
    public void process(OutputReceiver<PeriodicSequence.SequenceDefinition> out) throws IOException {
      long start = start(Paths.get(startFile));
      out.output(
          new PeriodicSequence.SequenceDefinition(
              new Instant(start),
              new Instant(start + ticks * INTERVAL_MILLIS),
              Duration.millis(INTERVAL_MILLIS)));
    }

    private static long start(Path path) throws IOException {
      if (!Files.exists(path)) {
        Path tmp = Files.createTempFile(path.toAbsolutePath().getParent(), ".start-", ".tmp");
        Files.write(tmp, String.valueOf(System.currentTimeMillis() + 1000).getBytes(StandardCharsets.UTF_8));
        try {
          Files.move(tmp, path, StandardCopyOption.ATOMIC_MOVE);
        } catch (FileAlreadyExistsException e) {
          Files.delete(tmp); // another bundle wrote it first: its start holds
        }
      }
      return Long.parseLong(new String(Files.readAllBytes(path), StandardCharsets.UTF_8).trim());
    }
  }

  public static void main(String[] args) {
    Options options = PipelineOptionsFactory.fromArgs(args).withValidation().as(Options.class);
    Pipeline p = Pipeline.create(options);
    p.apply("Impulse", Impulse.create())
        .apply("Start", ParDo.of(new Ticks(options.getStartFile(), options.getTicks())))
        .apply("Ticks", PeriodicSequence.create())
        .apply(
            "Keys",
            ParDo.of(
                new DoFn<Instant, KV<String, String>>() {
                  @ProcessElement
                  public void process(@Element Instant tick, OutputReceiver<KV<String, String>> out) {
                    out.output(KV.of("k" + (tick.getMillis() / INTERVAL_MILLIS) % 3, "1"));
                  }
                }))
        .apply("Windows", Window.into(FixedWindows.of(Duration.standardSeconds(5))))
        .apply("CountAndWrite", ParDo.of(new CountAndWrite(options.getOutput())));
    p.run().waitUntilFinish();
  }
}
