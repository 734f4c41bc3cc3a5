package org.example;

import org.apache.beam.sdk.Pipeline;
import org.apache.beam.sdk.coders.VarLongCoder;
import org.apache.beam.sdk.io.TextIO;
import org.apache.beam.sdk.options.PipelineOptionsFactory;
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
import org.apache.beam.sdk.transforms.windowing.BoundedWindow;
import org.apache.beam.sdk.values.KV;
import org.apache.beam.sdk.values.TypeDescriptors;

/**
 * The word count of {@link WordCount}, counted by a stateful DoFn: a count
 * per word in {@link ValueState}, emitted by an event-time timer set to the
 * end of the window (so once all of the word's input was read).
 */
public final class StatefulWordCount {
  private StatefulWordCount() {}

  /** Counts each key's values in state; emits the count when the window ends. */
  static final class CountInState extends DoFn<KV<String, Long>, KV<String, Long>> {
    @StateId("count")
    private final StateSpec<ValueState<Long>> countSpec = StateSpecs.value(VarLongCoder.of());

    @TimerId("emit")
    private final TimerSpec emitSpec = TimerSpecs.timer(TimeDomain.EVENT_TIME);

    @ProcessElement
    public void process(
        @Element KV<String, Long> element,
        @StateId("count") ValueState<Long> count,
        @TimerId("emit") Timer emit,
        BoundedWindow window) {
      Long seen = count.read();
      count.write((seen == null ? 0L : seen) + element.getValue());
      emit.set(window.maxTimestamp());
    }

    @OnTimer("emit")
    public void onEmit(
        @Key String word, @StateId("count") ValueState<Long> count, OutputReceiver<KV<String, Long>> out) {
      out.output(KV.of(word, count.read()));
      count.clear();
    }
  }

  public static void main(String[] args) {
    WordCount.Options options = PipelineOptionsFactory.fromArgs(args).withValidation().as(WordCount.Options.class);
    Pipeline p = Pipeline.create(options);
    WordCount.words(p, options.getInput())
        .apply(
            "Ones",
            MapElements.into(TypeDescriptors.kvs(TypeDescriptors.strings(), TypeDescriptors.longs()))
                .via((String word) -> KV.of(word, 1L)))
        .apply("CountInState", ParDo.of(new CountInState()))
        .apply(
            "Format",
            MapElements.into(TypeDescriptors.strings())
                .via((KV<String, Long> kv) -> kv.getKey() + "\t" + kv.getValue()))
        .apply("Write", TextIO.write().to(options.getOutput()).withNumShards(1));
    p.run().waitUntilFinish();
  }
}
