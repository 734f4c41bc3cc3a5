package beamsparkrunner.xlang;

import java.util.ArrayList;
import java.util.List;
import org.apache.beam.sdk.expansion.service.ExpansionService;

/**
 * Starts Beam's {@link ExpansionService} as the runner's expansion service:
 * the expansions it returns name a PROCESS environment (with the service's
 * jars as its artifacts), which the runner runs in Beam's Java SDK harness,
 * rather than Beam's default of a Docker image or a choice of several (a
 * client stages only a plain environment's jars). Beam's
 * {@code --alsoStartLoopbackWorker} is dropped: the runner starts its own
 * harnesses. Other arguments (the port first) are Beam's.
 */
public final class ExpansionServiceMain {
  /** The command the environment names; the runner never executes it. */
  public static final String ENVIRONMENT_COMMAND = "beam-spark-runner-java-harness";

  private ExpansionServiceMain() {}

  public static void main(String[] args) throws Exception {
    List<String> kept = new ArrayList<>();
    for (String arg : args) {
      if (!arg.equals("--alsoStartLoopbackWorker")) {
        kept.add(arg);
      }
    }
    kept.add("--defaultEnvironmentType=PROCESS");
    kept.add("--defaultEnvironmentConfig={\"command\": \"" + ENVIRONMENT_COMMAND + "\"}");
    ExpansionService.main(kept.toArray(new String[0]));
  }
}
