package org.example;

import java.util.Arrays;
import org.apache.beam.sdk.Pipeline;
import org.apache.beam.sdk.io.TextIO;
import org.apache.beam.sdk.options.Description;
import org.apache.beam.sdk.options.PipelineOptions;
import org.apache.beam.sdk.options.PipelineOptionsFactory;
import org.apache.beam.sdk.options.Validation;
import org.apache.beam.sdk.transforms.Count;
import org.apache.beam.sdk.transforms.Filter;
import org.apache.beam.sdk.transforms.FlatMapElements;
import org.apache.beam.sdk.transforms.MapElements;
import org.apache.beam.sdk.values.KV;
import org.apache.beam.sdk.values.PCollection;
import org.apache.beam.sdk.values.TypeDescriptors;

/** Counts the words of --input into --output (one file: word<TAB>count per line). */
public final class WordCount {
  /** The pipeline's own options, beside the runner's. */
  public interface Options extends PipelineOptions {
    @Description("Text file(s) to read")
    @Validation.Required
    String getInput();

    void setInput(String value);

    @Description("Output file prefix")
    @Validation.Required
    String getOutput();

    void setOutput(String value);
  }

  private WordCount() {}

  /** The lower-cased words of the text files `input`, one element each. */
  static PCollection<String> words(Pipeline p, String input) {
    return p.apply("Read", TextIO.read().from(input))
        .apply(
            "Words",
            FlatMapElements.into(TypeDescriptors.strings())
                .via((String line) -> Arrays.asList(line.toLowerCase().split("[^a-z']+"))))
        .apply("NonEmpty", Filter.by((String word) -> !word.isEmpty()));
  }

  public static void main(String[] args) {
    Options options = PipelineOptionsFactory.fromArgs(args).withValidation().as(Options.class);
    Pipeline p = Pipeline.create(options);
    words(p, options.getInput())
        .apply("Count", Count.perElement())
        .apply(
            "Format",
            MapElements.into(TypeDescriptors.strings())
                .via((KV<String, Long> kv) -> kv.getKey() + "\t" + kv.getValue()))
        .apply("Write", TextIO.write().to(options.getOutput()).withNumShards(1));
    p.run().waitUntilFinish();
  }
}
