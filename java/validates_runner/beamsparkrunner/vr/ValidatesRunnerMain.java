package beamsparkrunner.vr;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import org.junit.experimental.categories.Category;
import org.junit.runner.Description;
import org.junit.runner.JUnitCore;
import org.junit.runner.Request;
import org.junit.runner.manipulation.Filter;
import org.junit.runner.notification.Failure;
import org.junit.runner.notification.RunListener;

/**
 * The Java half of tools/java_validates_runner.py: lists the tests of Beam's test jars with their
 * JUnit categories, and runs chosen tests, writing one JSON object per test.
 * Which tests run is decided in Python (the category rule, the exclusions file, the CI slice);
 * this class only reports and runs.
 *
 * <pre>
 *   list OUT.jsonl JAR...              one line per test: class, method, categories
 *   run TESTS.txt OUT.jsonl            the Class#method lines' tests, class after class, in one JVM:
 *                                      one line per test: class, method, outcome, message
 * </pre>
 *
 * A test's categories are those of JUnit's category filter: the {@code @Category} of the method
 * and of its class, each with every interface it extends (UsesTestStreamWithProcessingTime is also
 * a UsesTestStream).
 */
public final class ValidatesRunnerMain {
  private ValidatesRunnerMain() {}

  public static void main(String[] args) throws Exception {
    if (args.length >= 2 && "list".equals(args[0])) {
      List<String> jars = new ArrayList<>();
      for (int i = 2; i < args.length; i++) {
        jars.add(args[i]);
      }
      list(args[1], jars);
    } else if (args.length == 3 && "run".equals(args[0])) {
      run(args[1], args[2]);
    } else {
      System.err.println("usage: list OUT.jsonl JAR... | run TESTS.txt OUT.jsonl");
      System.exit(2);
    }
    System.exit(0);
  }

  private static void list(String out, List<String> jars) throws IOException {
    try (Writer writer = Files.newBufferedWriter(Paths.get(out), StandardCharsets.UTF_8)) {
      for (String jar : jars) {
        for (String className : testClassNames(jar)) {
          Class<?> cls;
          try {
            cls = Class.forName(className, false, ValidatesRunnerMain.class.getClassLoader());
          } catch (Throwable e) {
            System.err.println("not loadable: " + className + ": " + e);
            continue;
          }
          if (!hasTests(cls)) {
            continue;
          }
          Description root;
          try {
            root = Request.aClass(cls).getRunner().getDescription();
          } catch (Throwable e) {
            System.err.println("no JUnit runner for " + className + ": " + e);
            continue;
          }
          Set<String> seen = new HashSet<>();
          for (Description leaf : leaves(root)) {
            if (leaf.getMethodName() == null || !seen.add(leaf.getMethodName())) {
              continue;
            }
            Set<String> categories = new TreeSet<>();
            addCategories(leaf.getAnnotation(Category.class), categories);
            Class<?> testClass = leaf.getTestClass() != null ? leaf.getTestClass() : cls;
            addCategories(testClass.getAnnotation(Category.class), categories);
            writer.write(
                "{\"class\": "
                    + quote(className)
                    + ", \"method\": "
                    + quote(leaf.getMethodName())
                    + ", \"categories\": "
                    + quoteAll(categories)
                    + "}\n");
          }
        }
      }
    }
  }

  /** Runs the tests named in {@code testsFile} (Class#method lines), class after class. */
  private static void run(String testsFile, String out) throws Exception {
    java.util.Map<String, Set<String>> byClass = new java.util.LinkedHashMap<>();
    for (String line : Files.readAllLines(Paths.get(testsFile))) {
      int hash = line.indexOf('#');
      if (hash > 0) {
        byClass.computeIfAbsent(line.substring(0, hash), k -> new HashSet<>()).add(line.substring(hash + 1));
      }
    }
    try (PrintWriter writer =
        new PrintWriter(Files.newBufferedWriter(Paths.get(out), StandardCharsets.UTF_8), true)) {
      JUnitCore core = new JUnitCore();
      core.addListener(new JsonLines(writer));
      for (java.util.Map.Entry<String, Set<String>> entry : byClass.entrySet()) {
        core.run(Request.aClass(Class.forName(entry.getKey())).filterWith(chosen(entry.getKey(), entry.getValue())));
      }
    }
  }

  private static Filter chosen(String className, Set<String> methods) {
    return new Filter() {
      @Override
      public boolean shouldRun(Description description) {
        if (description.getMethodName() == null) {
          for (Description child : description.getChildren()) {
            if (shouldRun(child)) {
              return true;
            }
          }
          return false;
        }
        return methods.contains(description.getMethodName());
      }

      @Override
      public String describe() {
        return "the chosen tests of " + className;
      }
    };
  }

  /** Writes each finished test as one JSON line, flushed at once so a killed JVM loses none. */
  private static final class JsonLines extends RunListener {
    private final PrintWriter writer;
    private final Set<Description> finished = new HashSet<>();
    private final Set<Description> failedOrSkipped = new HashSet<>();
    private long started;

    JsonLines(PrintWriter writer) {
      this.writer = writer;
    }

    @Override
    public void testStarted(Description description) {
      started = System.nanoTime();
      SparkJobServiceRunner.SUBMITTED.set(0);
      writer.println(line(description, "started", null));
    }

    @Override
    public void testFailure(Failure failure) {
      failedOrSkipped.add(failure.getDescription());
      writer.println(line(failure.getDescription(), "failed", trace(failure)));
    }

    @Override
    public void testAssumptionFailure(Failure failure) {
      failedOrSkipped.add(failure.getDescription());
      writer.println(line(failure.getDescription(), "skipped", failure.getMessage()));
    }

    @Override
    public void testIgnored(Description description) {
      writer.println(line(description, "ignored", null));
    }

    @Override
    public void testFinished(Description description) {
      if (finished.add(description) && !failedOrSkipped.contains(description)) {
        writer.println(line(description, "passed", null));
      }
    }

    private String line(Description d, String outcome, String message) {
      double seconds = (System.nanoTime() - started) / 1e9;
      return "{\"class\": "
          + quote(d.getClassName())
          + ", \"method\": "
          + quote(d.getMethodName())
          + ", \"outcome\": "
          + quote(outcome)
          + ", \"seconds\": "
          + String.format(java.util.Locale.ROOT, "%.3f", seconds)
          + ", \"pipelines\": "
          + SparkJobServiceRunner.SUBMITTED.get()
          + ", \"message\": "
          + (message == null ? "null" : quote(message))
          + "}";
    }
  }

  private static String trace(Failure failure) {
    StringWriter text = new StringWriter();
    failure.getException().printStackTrace(new PrintWriter(text));
    String all = text.toString();
    return all.length() > 4000 ? all.substring(0, 4000) : all;
  }

  private static List<String> testClassNames(String jar) throws IOException {
    List<String> names = new ArrayList<>();
    try (JarFile file = new JarFile(jar)) {
      Enumeration<JarEntry> entries = file.entries();
      while (entries.hasMoreElements()) {
        String name = entries.nextElement().getName();
        if (!name.endsWith(".class") || name.contains("-")) {
          continue;
        }
        String className = name.substring(0, name.length() - ".class".length()).replace('/', '.');
        String simple = className.substring(className.lastIndexOf('.') + 1);
        // Nested test classes (ParDoTest$StateTests) are test classes of their own; anonymous
        // and lambda classes ($1) are not.
        boolean anonymous = false;
        for (String part : simple.split("\\$")) {
          if (!part.isEmpty() && Character.isDigit(part.charAt(0))) {
            anonymous = true;
          }
        }
        if (!anonymous) {
          names.add(className);
        }
      }
    }
    java.util.Collections.sort(names);
    return names;
  }

  private static boolean hasTests(Class<?> cls) {
    try {
      if (java.lang.reflect.Modifier.isAbstract(cls.getModifiers())
          || !java.lang.reflect.Modifier.isPublic(cls.getModifiers())
          || cls.isInterface()) {
        return false;
      }
      if (cls.getEnclosingClass() != null
          && !java.lang.reflect.Modifier.isStatic(cls.getModifiers())) {
        return false;
      }
      for (java.lang.reflect.Method m : cls.getMethods()) {
        if (m.isAnnotationPresent(org.junit.Test.class)) {
          return true;
        }
      }
    } catch (Throwable e) {
      // Reported: a test class that needs a jar the set lacks would vanish from the suite.
      System.err.println("not loadable: " + cls.getName() + ": " + e);
    }
    return false;
  }

  private static List<Description> leaves(Description root) {
    List<Description> out = new ArrayList<>();
    if (root.getChildren().isEmpty()) {
      out.add(root);
    }
    for (Description child : root.getChildren()) {
      out.addAll(leaves(child));
    }
    return out;
  }

  private static void addCategories(Category category, Set<String> out) {
    if (category == null) {
      return;
    }
    for (Class<?> c : category.value()) {
      addWithSupertypes(c, out);
    }
  }

  private static void addWithSupertypes(Class<?> c, Set<String> out) {
    if (c == null || c == Object.class || !out.add(c.getName())) {
      return;
    }
    for (Class<?> parent : c.getInterfaces()) {
      addWithSupertypes(parent, out);
    }
    addWithSupertypes(c.getSuperclass(), out);
  }

  private static String quote(String s) {
    if (s == null) {
      return "null";
    }
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      switch (c) {
        case '"':
          b.append("\\\"");
          break;
        case '\\':
          b.append("\\\\");
          break;
        case '\n':
          b.append("\\n");
          break;
        case '\r':
          b.append("\\r");
          break;
        case '\t':
          b.append("\\t");
          break;
        default:
          if (c < 0x20) {
            b.append(String.format("\\u%04x", (int) c));
          } else {
            b.append(c);
          }
      }
    }
    return b.append('"').toString();
  }

  private static String quoteAll(Set<String> values) {
    List<String> quoted = new ArrayList<>();
    for (String v : new LinkedHashSet<>(values)) {
      quoted.add(quote(v));
    }
    return "[" + String.join(", ", quoted) + "]";
  }
}
